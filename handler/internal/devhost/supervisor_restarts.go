package devhost

import (
	"fmt"
	"time"
)

// The host's restart rules for a handler that ended or hung: restart, count
// the crash, recycle the instance.

// supervise applies the host's rules whenever the handler ends
// (WorkerProcess.OnProcessExited, HttpFunctionInvocationDispatcher): exit 0
// is never restarted; exit 200 is restarted without counting; a crash
// (another code, killed) is counted and restarted, and the third of a chain
// stops the host (StopApplication), which the platform then recycles; a kill
// for a timeout is restarted without counting.
func (in *Instance) supervise() {
	defer in.wg.Done()
	for {
		in.mu.Lock()
		exited, cmd := in.exited, in.cmd
		in.mu.Unlock()
		select {
		case <-in.ctx.Done():
			// The handler started last (stop may have killed the one before).
			_ = cmd.Process.Kill()
			<-exited
			return
		case <-in.recycle:
			in.recycleHost("recycled by the platform")
			continue
		case <-exited:
		}
		if in.ctx.Err() != nil {
			return
		}
		in.mu.Lock()
		timedOut := in.timedOut
		in.mu.Unlock()
		code := cmd.ProcessState.ExitCode() // -1 when killed by a signal
		switch {
		case code == 0:
			in.mu.Lock()
			in.gone = true
			in.setReady(false)
			in.mu.Unlock()
			in.logf("the handler exited with code 0: the host does not restart it (WorkerProcess.OnProcessExited); its listeners go on and every invocation fails until the host is recycled")
			select {
			case <-in.ctx.Done():
				return
			case <-in.recycle:
				in.recycleHost("recycled by the platform")
			}
			continue
		case code == exitRestart:
			in.logf("the handler exited with code %d: restarting it without counting an error (IntentionalRestartExitCode)", code)
		case !timedOut && in.countError():
			in.recycleHost(fmt.Sprintf("Exceeded http worker restart retry count: %d handler errors, each within %s of the previous (the last: %s); the host shut down and its triggers stopped",
				errorBudget, in.host.scale(errorWindow), cmd.ProcessState))
			continue
		}
		in.restarts.Add(1)
		in.host.restarts.Add(1)
		in.logf("handler ended (%s); restarting it", cmd.ProcessState)
		in.restartHandler()
	}
}

func (in *Instance) restartHandler() {
	for in.ctx.Err() == nil {
		if err := in.startHandler(); err != nil {
			in.logf("%v; retrying", err)
			time.Sleep(time.Second)
			continue
		}
		return
	}
}

// recycleHost stops the instance's host (its listeners stop and their calls
// finish, the timer lock is released, the handler is disposed of) and,
// after the recycle delay, starts a fresh one: a new handler, a new crash
// budget ("proactively recycling the Functions Host",
// RpcFunctionInvocationDispatcher; the platform restarts a host that exits).
func (in *Instance) recycleHost(why string) {
	in.mu.Lock()
	in.stopped = why
	in.runCancel()
	if in.ready {
		in.setReady(false)
	}
	cmd, exited := in.cmd, in.exited
	in.mu.Unlock()
	in.logf("%s", why)
	if cmd != nil {
		_ = cmd.Process.Kill()
		<-exited
	}
	in.lwg.Wait()
	delay := in.host.scale(in.host.opts.RecycleDelay)
	in.logf("the platform recycles the host in %s", delay)
	select {
	case <-in.ctx.Done():
		return
	case <-time.After(delay):
	}
	in.mu.Lock()
	in.errors, in.gone, in.stopped = nil, false, ""
	in.mu.Unlock()
	in.newRun()
	in.restartHandler()
	if err := in.awaitReady(); err != nil {
		in.logf("after the recycle: %v", err)
		return
	}
	in.recycles.Add(1)
	in.startListeners()
	in.logf("recycled: a fresh host (handler on 127.0.0.1:%d)", in.port())
}

// countError records a handler error and reports whether the budget is
// spent. As HttpFunctionInvocationDispatcher.AddOrUpdateErrorBucket does, the
// count starts over when an error comes more than 30 minutes after the
// previous one: the budget is for a chain of errors, not a sliding window.
func (in *Instance) countError() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	now := time.Now()
	if n := len(in.errors); n > 0 && now.Sub(in.errors[n-1]) > in.host.scale(errorWindow) {
		in.errors = in.errors[:0]
	}
	in.errors = append(in.errors, now)
	return len(in.errors) >= errorBudget
}

// killForTimeout restarts the handler after an invocation outlived
// functionTimeout; such restarts are not counted as errors.
func (in *Instance) killForTimeout(port int) {
	in.mu.Lock()
	cmd := in.cmd
	mine := in.handlerPort == port
	if mine {
		// The dispatcher is restarting from now on: new invocations wait.
		in.timedOut = true
		if in.ready {
			in.setReady(false)
		}
	}
	in.mu.Unlock()
	if mine && cmd != nil {
		_ = cmd.Process.Kill()
	}
}
