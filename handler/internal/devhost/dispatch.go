package devhost

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Defaults of the Service Bus extension 5.x (docs/host-contract.md, host.json table).
const (
	defaultMaxConcurrentSessions = 8
	defaultMaxConcurrentCalls    = 16 // per core; the emulation counts one core
	defaultMaxMessageBatchSize   = 1000
)

// listen starts an instance's listener for a Service Bus trigger. Single
// dispatch with sessions: maxConcurrentSessions session receivers, one
// message at a time per session, each session lock renewed for
// maxAutoLockRenewalDuration from its acceptance. Batch dispatch with
// sessions: one session at a time per instance, its lock never renewed.
// Without sessions: maxConcurrentCalls receivers, each message lock renewed
// for maxAutoLockRenewalDuration from its receipt.
func (in *Instance) listen(f Function) {
	h := in.host
	q := h.queues[f.Trigger.QueueName]
	renewFor := h.scale(h.app.MaxAutoLockRenewal)
	if !f.Trigger.IsSessionsEnabled {
		for range maxConcurrentCalls(h.app) {
			in.wg.Add(1)
			go func() {
				defer in.wg.Done()
				for {
					m, settle := q.Receive(in.ctx, renewFor)
					if m == nil {
						return
					}
					msgs := []*Message{m}
					in.settled(f, msgs, settle(in.report(f, msgs, h.invoke(in.ctx, in, f, msgs))))
				}
			}()
		}
		return
	}
	workers, batch := maxConcurrentSessions(h.app), 1
	if f.Batch() {
		workers, batch, renewFor = 1, maxMessageBatchSize(h.app), 0
	}
	for range workers {
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			for {
				lock := q.AcceptSession(in.ctx, renewFor)
				if lock == nil {
					return
				}
				for {
					msgs, err := lock.Next(in.ctx, batch, h.app.SessionIdleTimeout)
					if err != nil {
						in.logf("%s: session %s: %v; the receiver closes it", f.Name, lock.SessionID(), err)
					}
					if len(msgs) == 0 {
						break
					}
					ok := in.report(f, msgs, h.invoke(in.ctx, in, f, msgs))
					if err := lock.Settle(msgs, ok); err != nil {
						in.settled(f, msgs, err)
						break
					}
				}
				lock.Release()
			}
		}()
	}
}

func maxConcurrentSessions(a *App) int {
	if n := a.Host.Extensions.ServiceBus.MaxConcurrentSessions; n > 0 {
		return n
	}
	return defaultMaxConcurrentSessions
}

func maxConcurrentCalls(a *App) int {
	if n := a.Host.Extensions.ServiceBus.MaxConcurrentCalls; n > 0 {
		return n
	}
	return defaultMaxConcurrentCalls
}

func maxMessageBatchSize(a *App) int {
	if n := a.Host.Extensions.ServiceBus.MaxMessageBatchSize; n > 0 {
		return n
	}
	return defaultMaxMessageBatchSize
}

// report logs a failed invocation and tells whether the messages should be
// completed.
func (in *Instance) report(f Function, msgs []*Message, err error) bool {
	if err != nil && !errors.Is(err, errHostStopped) {
		in.logf("%s failed (%s, delivery %d): %v", f.Name, describeMsgs(msgs), msgs[0].DeliveryCount, err)
	}
	return err == nil
}

// settled logs a settlement that failed: after a lost lock the SDK neither
// completes nor abandons; the messages come back when the lock expires.
func (in *Instance) settled(f Function, msgs []*Message, err error) {
	if err != nil {
		in.host.lockLosses.Add(1)
		in.logf("%s: settling %s failed: %v (they come back with DeliveryCount +1)", f.Name, describeMsgs(msgs), err)
	}
}

func describeMsgs(msgs []*Message) string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.MessageID
	}
	s := strings.Join(ids, ",")
	if msgs[0].SessionID != "" {
		s = "session " + msgs[0].SessionID + ": " + s
	}
	return s
}

// invoke runs a Service Bus triggered function on one instance, unless an
// injected fault fails it first.
func (h *Host) invoke(ctx context.Context, in *Instance, f Function, msgs []*Message) error {
	h.calls.Add(1)
	defer h.calls.Add(-1)
	if fault := h.fault.Load(); fault != nil {
		if err := (*fault)(f.Name, msgs); err != nil {
			h.invocations.Add(1)
			h.failures.Add(1)
			return err
		}
	}
	_, err := in.call(ctx, f.Name, "/"+f.Name, EncodeInvocation(f, msgs, time.Now()))
	return err
}

// scaleTarget is target-based scaling for one trigger, as
// ServiceBusTargetScaler computes it: ceil(active messages / concurrency),
// where concurrency is maxMessageBatchSize for a batch trigger,
// maxConcurrentSessions for a session trigger, maxConcurrentCalls otherwise.
// (docs/host-contract.md says sessions / maxConcurrentSessions; the scaler only
// sees the queue's active message count, so it divides messages.)
func scaleTarget(a *App, f Function, st QueueStats) int {
	switch {
	case f.Batch():
		return ceilDiv(st.Active, maxMessageBatchSize(a))
	case f.Trigger.IsSessionsEnabled:
		return ceilDiv(st.Active, maxConcurrentSessions(a))
	}
	return ceilDiv(st.Active, maxConcurrentCalls(a))
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// scaleOut adds instances while the triggers' targets ask for more, up to
// Options.MaxInstances. Instances are not removed while the emulation runs,
// and an instance whose host stopped is not replaced.
func (h *Host) scaleOut() {
	defer h.wg.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-tick.C:
		}
		want := 1
		for _, f := range h.app.Functions {
			if f.Trigger.Type == "serviceBusTrigger" {
				want = max(want, scaleTarget(h.app, f, h.queues[f.Trigger.QueueName].Stats()))
			}
		}
		want = min(want, h.opts.MaxInstances)
		if n := len(h.Instances()); n < want {
			in := newInstance(h, n)
			if err := in.start(); err != nil {
				if h.ctx.Err() == nil {
					h.log.Printf("scale out to %d instances: %v", n+1, err)
				}
				continue
			}
			h.mu.Lock()
			h.instances = append(h.instances, in)
			h.mu.Unlock()
			h.log.Printf("scaled out to %d instances (target %d)", n+1, want)
		}
	}
}
