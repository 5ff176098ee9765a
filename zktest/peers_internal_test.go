package zktest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"testing"
)

func electionMessage(version, sid int64, addr string, rest string) []byte {
	var b bytes.Buffer
	_ = binary.Write(&b, binary.BigEndian, version)
	_ = binary.Write(&b, binary.BigEndian, sid)
	_ = binary.Write(&b, binary.BigEndian, int32(len(addr)))
	b.WriteString(addr)
	b.WriteString(rest)
	return b.Bytes()
}

func TestElectionGreeting(t *testing.T) {
	const announce = "127.0.0.1:4242"
	huge := electionMessage(electionProtocolV1, 2, "", "")
	binary.BigEndian.PutUint32(huge[16:20], 1<<30)
	tests := []struct {
		name    string
		in      []byte
		want    []byte // the greeting forwarded
		rest    string // what the reader still holds after it
		wantErr bool
	}{
		{"v1 address rewritten", electionMessage(electionProtocolV1, 3, "127.0.0.1:1111", "NEXT"),
			electionMessage(electionProtocolV1, 3, announce, ""), "NEXT", false},
		{"v2 address rewritten", electionMessage(electionProtocolV2, 1, "127.0.0.1:1|127.0.0.2:1", ""),
			electionMessage(electionProtocolV2, 1, announce, ""), "", false},
		{"bare sid passes", append(binary.BigEndian.AppendUint64(nil, 7), "NEXT"...),
			binary.BigEndian.AppendUint64(nil, 7), "NEXT", false},
		{"address length beyond the bound", huge, nil, "", true},
		{"short message", electionMessage(electionProtocolV1, 3, "127.0.0.1:1111", "")[:18], nil, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(bytes.NewReader(tt.in))
			got, err := electionGreeting(announce)(r)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if !bytes.Equal(got, tt.want) {
				t.Fatalf("greeting = %q, want %q", got, tt.want)
			}
			rest := make([]byte, 16)
			n, _ := r.Read(rest)
			if string(rest[:n]) != tt.rest {
				t.Fatalf("left %q, want %q", rest[:n], tt.rest)
			}
		})
	}
}
