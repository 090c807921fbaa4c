package amqp

import (
	"io"
	"net"
	"testing"
	"time"
)

// FuzzServe: whatever frames a client sends after its open, the engine
// never panics and ends the connection when the client goes (a transfer
// on a refused link once dereferenced a nil handler).
func FuzzServe(f *testing.F) {
	frames := func(fs ...Frame) []byte {
		var b []byte
		for _, fr := range fs {
			var err error
			if b, err = AppendFrame(b, fr); err != nil {
				f.Fatal(err)
			}
		}
		return b
	}
	begin := Frame{Body: New(CodeBegin, nil, uint32(0), uint32(100), uint32(100))}
	attach := func(h uint32, target string) Frame {
		return Frame{Body: New(CodeAttach, "l", h, false, uint8(2), uint8(0), New(CodeSource, "c").Described(), New(CodeTarget, target).Described(), nil, nil, uint32(0))}
	}
	transfer := func(h uint32, more bool, payload string) Frame {
		return Frame{Body: New(CodeTransfer, h, uint32(0), []byte("t"), uint32(0), false, more), Payload: []byte(payload)}
	}
	f.Add(frames(begin, attach(0, "q"), transfer(0, false, "m")))
	f.Add(frames(begin, attach(0, "nowhere"), transfer(0, false, "m"), Frame{Body: New(CodeDetach, uint32(0), true)}))
	f.Add(frames(begin, attach(0, "q"), transfer(0, true, "ab"), transfer(0, true, "cd"), Frame{Body: New(CodeDetach, uint32(0), true)}, attach(0, "q"), transfer(0, false, "e")))
	f.Add(frames(begin, attach(0, "q"), transfer(0, false, "1"), transfer(0, false, "2"), transfer(0, false, "3")))
	f.Add(frames(begin, Frame{Body: New(CodeFlow, uint32(0), uint32(10), uint32(0), uint32(10), uint32(0), uint32(0), uint32(5), nil, true, true)}, Frame{Body: New(CodeEnd)}))
	f.Fuzz(func(t *testing.T, b []byte) {
		h := &refusingHandler{testHandler: newTestHandler(64, 2)}
		server, client := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = Serve(server, Config{Handler: h, MaxMessageSize: 32, HandshakeTimeout: time.Second})
			_ = server.Close()
		}()
		go func() { _, _ = io.Copy(io.Discard, client) }()
		open, _ := AppendFrame(nil, Frame{Body: New(CodeOpen, "fuzz")})
		_, _ = client.Write(append(append([]byte(nil), HeaderAMQP...), open...))
		_ = client.SetWriteDeadline(time.Now().Add(time.Second))
		_, _ = client.Write(b)
		_ = client.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the connection outlived its client")
		}
	})
}
