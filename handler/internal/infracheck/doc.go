// Package infracheck has no code, only tests: they parse every Bicep file
// (tree-sitter grammar), evaluate the deployment (deployment_test.go: each
// module with the parameters its caller passes, each loop's iterations) and
// fail when a queue, table, connection setting or role that a function needs
// differs between Bicep, function.json, host.json, the local emulator config
// and the program's settings, when the templates do not deploy every
// registered domain (handler/domains.All) with its functions, queue, table,
// settings, roles and alerts (domains_test.go), or when a template carries a
// secret. The deployment rules (deploy_test.go) catch what
// would fail a first `make provision` / `azd up`: properties Flex Consumption
// refuses, resource names computed (eval_test.go) for the oddest environment
// names azd accepts (each name of a resource loop too), the principal type,
// azd hooks, scale bounds, endpoints, queue sessions, the alert rules and
// their heartbeat (a rule on the absence of a domain's metrics lines), the
// alert e-mail from azd (ALERT_EMAIL). Each rule is proven by a mutation of
// the templates that it must catch.
package infracheck
