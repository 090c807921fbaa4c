package bench_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkHandlerCPU (issue 18): the handler process's CPU per message on
// the acceptance workload (16 sessions, the host's encoding, real Azurite),
// divided by the floor: the CPU per message of a minimal program
// (cmd/commitfloor) that only submits the same entity-group transactions with
// the same SDK and client options, 16 sessions in parallel, in the same run.
func BenchmarkHandlerCPU(b *testing.B) {
	const sessions, perOrder = 16, 300
	az := sharedAzurite(b)
	floorBin := filepath.Join(b.TempDir(), "commitfloor")
	if out, err := exec.Command("go", "build", "-o", floorBin, "./cmd/commitfloor").CombinedOutput(); err != nil {
		b.Fatalf("build the floor: %v\n%s", err, out)
	}
	for i := range b.N {
		handler := pipeline(b, az, fmt.Sprintf("cpu%d", i), sessions, perOrder, false)
		floor := commitFloor(b, floorBin, az.ConnectionString(), fmt.Sprintf("floor%d", i), sessions, perOrder)
		perMsg := func(d time.Duration, n int) float64 { return d.Seconds() / float64(n) }
		h, f := perMsg(handler.handlerCPU, handler.messages), perMsg(floor.cpu, floor.messages)
		ratio("handler_cpu_vs_floor", h/f,
			"handler process CPU per message, 16 sessions / CPU per message of submitting the same transactions alone", atMost(1.5))
		record(figure{name: "handler_cpu_per_message", value: h * 1e6, unit: "us",
			what: "handler process CPU per OrderProcessor message (user + system)"})
		record(figure{name: "floor_cpu_per_message", value: f * 1e6, unit: "us",
			what: "CPU per message of the floor program (the numerator's baseline)"})
		record(figure{name: "handler_messages_per_cpu_second", value: 1 / h, unit: "per_s",
			what: "messages one fully used vCPU of an instance can process (1 / handler CPU per message)"})
	}
}

type floorRun struct {
	cpu      time.Duration
	messages int
}

func commitFloor(b *testing.B, bin, conn, table string, sessions, perOrder int) floorRun {
	cmd := exec.Command(bin, "-sessions", fmt.Sprint(sessions), "-messages", fmt.Sprint(perOrder), "-table", table)
	cmd.Env = append(cmd.Environ(), "StateStorage="+conn)
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("commitfloor: %v", err)
	}
	var r struct {
		CPUSeconds float64 `json:"cpuSeconds"`
		Messages   int     `json:"messages"`
	}
	if err := json.Unmarshal(out, &r); err != nil || r.Messages != sessions*perOrder {
		b.Fatalf("commitfloor printed %q (%v)", out, err)
	}
	return floorRun{cpu: time.Duration(r.CPUSeconds * float64(time.Second)), messages: r.Messages}
}
