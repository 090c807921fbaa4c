// Command commitfloor is the floor of the handler's CPU per message, for the
// benchmark suite only: a minimal program that, for the same messages, only
// submits the entity-group transaction the processor commits for each (a
// version marker, the order's head, the transaction row) with the same SDK
// and client options, sessions in parallel, one message after the other per
// session. It prints its process CPU (getrusage) over the submissions.
//
//	commitfloor -sessions 16 -messages 500 -table T   (StateStorage in the environment)
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"

	"github.com/convoy-dev/convoy/handler/internal/bench/commitshape"
)

func main() {
	sessions := flag.Int("sessions", 16, "orders in parallel")
	messages := flag.Int("messages", 500, "messages per order")
	table := flag.String("table", "", "the table (created if missing)")
	prefix := flag.String("prefix", "floor", "order id prefix")
	flag.Parse()
	svc, err := aztables.NewServiceClientFromConnectionString(os.Getenv("StateStorage"), nil) // as main.go builds it
	if err != nil {
		fail(err)
	}
	client := svc.NewClient(*table)
	ctx := context.Background()
	if _, err := client.CreateTable(ctx, nil); err != nil && !tableExists(err) {
		fail(err)
	}
	before := cpu()
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, *sessions)
	for s := range *sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			order := fmt.Sprintf("%s-%05d", *prefix, s)
			for seq := int64(1); seq <= int64(*messages); seq++ {
				if _, err := client.SubmitTransaction(ctx, commitshape.Actions(order, seq), nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		fail(err)
	}
	out, _ := json.Marshal(map[string]any{"cpuSeconds": (cpu() - before).Seconds(), "seconds": time.Since(t0).Seconds(),
		"messages": *sessions * *messages})
	fmt.Println(string(out))
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func tableExists(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.ErrorCode == string(aztables.TableAlreadyExists)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "commitfloor:", err)
	os.Exit(1)
}
