package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"

	"github.com/convoy-dev/convoy/handler/convoy"
	"github.com/convoy-dev/convoy/handler/domains"
	"github.com/convoy-dev/convoy/handler/fault"
	"github.com/convoy-dev/convoy/handler/keyed"
	"github.com/convoy-dev/convoy/handler/operator"
	"github.com/convoy-dev/convoy/handler/settings"
)

// The operator's commands act on the keys of one domain, --domain NAME
// (default the first registered, orders): its table, its queue.

// domainFlag adds --domain to fs.
func domainFlag(fs *flag.FlagSet) *string {
	return fs.String("domain", domains.All[0].Name(), "the domain of the keys named: "+domainNames())
}

func domainNames() string {
	names := make([]string, len(domains.All))
	for i, d := range domains.All {
		names[i] = d.Name()
	}
	return strings.Join(names, ", ")
}

// checkDomain refuses a --domain that names no registered domain, before
// any setting is read.
func checkDomain(command, name string) error {
	for _, d := range domains.All {
		if d.Name() == name {
			return nil
		}
	}
	return usageErrorf(command, "--domain %q is not a registered domain (%s)", name, domainNames())
}

// registered is the registered domain called name (checkDomain passed).
func registered(name string) keyed.Domain {
	for _, d := range domains.All {
		if d.Name() == name {
			return d
		}
	}
	return nil
}

// domainArg is the --domain flag naming d in a command to type, "" for
// the default domain.
func domainArg(d settings.Domain) string {
	if d.Name() == domains.All[0].Name() {
		return ""
	}
	return " --domain " + d.Name()
}

// domainOf is the settings of the domain called name (checkDomain passed).
func domainOf(cfg settings.Settings, name string) settings.Domain {
	d, _ := cfg.Domain(name)
	return d
}

// checkKey refuses an id no key of d can have.
func checkKey(command string, d keyed.Domain, id string) error {
	if why := keyed.CheckID(id); why != "" {
		return usageErrorf(command, "%s id %s %s", d.Noun(), keyed.Quote(id), why)
	}
	return nil
}

// keyStatus is `convoy status [--domain NAME] ID...`: each key's page as
// GET /api/<name>/{id} answers it (its state, head and first page of
// history), read from the domain's table.
func keyStatus(args []string) error {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	domain := domainFlag(fs)
	pageSize := fs.Int("page-size", 20, fmt.Sprintf("history rows shown (1 to %d)", convoy.MaxHistoryPageSize))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkDomain("status", *domain); err != nil {
		return err
	}
	if *pageSize < 1 || *pageSize > convoy.MaxHistoryPageSize {
		return usageErrorf("status", "--page-size %d is not between 1 and %d", *pageSize, convoy.MaxHistoryPageSize)
	}
	return userCommand(fs, nil, "id", true, func() string { return "the state is read there" },
		func(ctx context.Context, cfg settings.Settings, c *clients, id string, out *json.Encoder) error {
			d := domainOf(cfg, *domain)
			if err := checkKey("status", d.Rules, id); err != nil {
				return err
			}
			store := c.operatorStore(d.Table)
			v, err := convoy.ReadView(ctx, d.Rules, store, store, id, "", *pageSize)
			if err != nil {
				return describe(id, err)
			}
			return out.Encode(v)
		}, fs.Args()...)
}

// blockedKeys is `convoy blocked [--domain NAME]`: every blocked key of
// the domain, oldest first, as GET /api/<name>?blocked=true lists them
// page after page.
func blockedKeys(args []string) error {
	fs := flag.NewFlagSet("blocked", flag.ContinueOnError)
	domain := domainFlag(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkDomain("blocked", *domain); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("blocked", "blocked takes no arguments (got %q): choose the domain with --domain", fs.Args())
	}
	return userCommand(fs, nil, "", true, func() string { return "the blocked index is read there" },
		func(ctx context.Context, cfg settings.Settings, c *clients, _ string, out *json.Encoder) error {
			d := domainOf(cfg, *domain)
			store := c.operatorStore(d.Table)
			keys := []convoy.BlockedOrder{}
			for token := ""; ; {
				page, err := convoy.ListBlocked(ctx, store, token, convoy.MaxBlockedPageSize)
				if err != nil {
					return describe("blocked", fault.Wrap(fault.CodeOf(err), err, "list the blocked "+d.Name()))
				}
				keys = append(keys, page.Orders...)
				if token = page.Continuation; token == "" {
					break
				}
			}
			list, err := operator.WithIDName(keys, operator.IDName(d.Rules))
			if err != nil {
				return err
			}
			return out.Encode(map[string]json.RawMessage{d.Name(): list})
		}, "")
}
