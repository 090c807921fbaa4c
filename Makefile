# convoy — `make` alone lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

AZURITE_VERSION := 3.35.0
# The JavaScript Service Bus SDK: the conformance suite's independent client.
SERVICEBUS_JS_VERSION := 7.9.5
STATICCHECK     := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TOOLS           := $(CURDIR)/.tools
AZURITE_TABLE   := $(TOOLS)/node_modules/.bin/azurite-table
BINARY          := bin/convoy
GO_SOURCES      := $(shell find . -name '*.go' -not -path './.tools/*') go.mod go.sum

SERVICEBUS_JS   := $(TOOLS)/node_modules/@azure/service-bus/package.json

export AZURITE_TABLE

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: $(AZURITE_TABLE) $(SERVICEBUS_JS) ## install project-local tools (Azurite and the JavaScript Service Bus SDK from npm into .tools/)

$(AZURITE_TABLE) $(SERVICEBUS_JS) &:
	@mkdir -p $(TOOLS)
	@echo "installing Azurite $(AZURITE_VERSION) and @azure/service-bus $(SERVICEBUS_JS_VERSION) from npm into .tools/ (once; about half a minute on a fresh machine)"
	@npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION) @azure/service-bus@$(SERVICEBUS_JS_VERSION)
	@touch $(AZURITE_TABLE) $(SERVICEBUS_JS)

.PHONY: build
build: $(BINARY) ## build the handler: a static linux/amd64 binary in bin/

$(BINARY): $(GO_SOURCES)
	@echo "building $@"
	@CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o $@ .

# The emulation's command (built, not `go run`, so that a signal to make
# reaches it: make passes SIGTERM to the command it runs, which stops the
# emulation, the handler and Azurite).
DEVHOST_CMD := bin/convoy-devhost

$(DEVHOST_CMD): $(GO_SOURCES)
	@echo "building $@"
	@go build -o $@ ./handler/internal/devhost/cmd/convoy-devhost

# Where stage lays the app out: dist/ (what deploy publishes); make devhost
# stages its own copy per PORT under bin/devhost/, so that a second one never
# deletes the files of one that runs.
STAGE ?= dist

# The layout itself (host.json, the binary, each function.json, .funcignore,
# local.settings.json) is written once, in Go (devhost.Stage), which the
# emulation's tests stage with too.
.PHONY: stage
stage: $(BINARY) $(DEVHOST_CMD) ## stage the function app in dist/ (what `func azure functionapp publish --custom` uploads)
	@$(DEVHOST_CMD) stage -app $(STAGE) -binary $(BINARY)

.PHONY: test
# The packages whose tests take longest, named first so that go test starts
# them first (it runs the packages in the order given, -p at a time): the
# run then ends with the short ones instead of waiting on a long one.
SLOW_PACKAGES := ./handler/internal/devhost ./handler/internal/devbus ./handler/tablestore .
TEST_FLAGS    := -race -count=1 -p 3 -parallel 3 -timeout 9m

test: tools chromium ## lint beside every test (installs Azurite and Chromium, starts and stops its own servers)
	@$(MAKE) --no-print-directory lint & lint=$$!; \
	echo "go test $(TEST_FLAGS) $(SLOW_PACKAGES) ./..."; \
	go test $(TEST_FLAGS) $(SLOW_PACKAGES) ./...; tests=$$?; \
	wait $$lint || { echo "make lint failed"; exit 1; }; exit $$tests

# The packages whose tests start servers (Azurite, the handler under the
# emulation, Node.js, Chromium): make unit leaves them out whole, so that no
# test ever skips; make test runs everything.
SERVER_PACKAGES := . ./handler/tablestore ./handler/internal/azurite ./handler/internal/devbus ./handler/internal/devhost/... ./handler/internal/bench/...

.PHONY: unit
unit: ## the packages whose tests need no server, in under a minute; make test runs them all
	go test -short $$(go list ./... | grep -vxF "$$(go list $(SERVER_PACKAGES))")

# The dashboard test renders the page in headless Chromium (Debian's chromium
# package); it is installed here when missing, never skipped by the test.
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || { \
	  echo "installing Debian's chromium for the dashboard test"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && $$sudo apt-get install -y -qq chromium >/dev/null; }

.PHONY: lint
lint: ## gofmt, go vet, staticcheck
	go mod download
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.tools/*')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	go run $(STATICCHECK) ./...

.PHONY: start
start: stage ## run the function app with Azure Functions Core Tools (`func start` in dist/)
	@command -v func >/dev/null || { echo "Core Tools (func) is not installed: see docs/emulation.md, 'Run with Core Tools'"; exit 1; }
	@[ -f dist/local.settings.json ] || { echo "copy local.settings.json.example to local.settings.json first"; exit 1; }
	cd dist && func start

.PHONY: demo
demo: tools $(DEVHOST_CMD) ## run the whole pipeline locally on the sample ledgers and check every order
	@$(MAKE) --no-print-directory stage STAGE=bin/devhost/demo >/dev/null
	@$(DEVHOST_CMD) demo -app bin/devhost/demo -ledgers testdata/ledgers

# make devhost INSTANCES=3: target-based scale-out up to three host instances.
INSTANCES ?= 1
# make devhost PORT=7072: the front end's port (the functions, the dashboard);
# make break takes the same PORT.
PORT ?= 7071

.PHONY: devhost
devhost: tools $(DEVHOST_CMD) $(BINARY) ## serve the app under the local host + Service Bus emulation until Ctrl-C (PORT=7071, settings from local.settings.json and the environment)
	@$(DEVHOST_CMD) port-free -port $(PORT)
	@$(MAKE) --no-print-directory stage STAGE=bin/devhost/$(PORT) >/dev/null
	@exec $(DEVHOST_CMD) run -app bin/devhost/$(PORT) -port $(PORT) -instances $(INSTANCES) -settings local.settings.json

.PHONY: break
break: $(DEVHOST_CMD) ## against a running make devhost (same PORT): a blocked order of each kind (a poison message, a transient failure) and a blocked account, to practise replay and skip
	@$(DEVHOST_CMD) break -app bin/devhost/$(PORT) -port $(PORT)

# make soak SEEDS=20000, or DURATION=30m: the healing simulation
# (handler/internal/healsim) over as many seeds as asked, and beside it the
# order and the account domains through the rules harness
# (keyedtest.Simulate, handler/orders and handler/accounts) for as long; a
# failing seed prints the command that replays it.
SEEDS    ?= 5000
DURATION ?= 0
FIRST    ?= 1

.PHONY: soak
soak: ## the healing simulation and the order and account rules' simulations for as long as asked: make soak SEEDS=20000 (or DURATION=30m; FIRST= the first seed)
	@go test -count=1 -timeout 0 -p 2 -run 'Test(Order|Account)RulesSimulated' ./handler/orders ./handler/accounts -v -first=$(FIRST) -duration=$(DURATION) & rules=$$!; \
	go test -count=1 -timeout 0 -run TestHealingSimulation ./handler/internal/healsim -v -seeds=$(SEEDS) -duration=$(DURATION) -first=$(FIRST); heal=$$?; \
	wait $$rules || { echo "the rules' simulations failed"; exit 1; }; exit $$heal

# make mutants ONLY=resume-dropped,skip-accepts-parked JOBS=2: the mutation
# check of the healing path (handler/internal/mutants/mutants.txt), each
# mutant compiled in with go test -overlay (the tree is never touched).
# MUTANT_SEEDS: the simulation's seeds per mutant (make test runs 300).
JOBS ?= 1
ONLY ?=
MUTANT_SEEDS ?= 500

.PHONY: mutants
mutants: ## the mutation check of the healing path: each mutant against the simulation, then the unit tests (ONLY=ids, JOBS=1, MUTANT_SEEDS=500)
	go run ./handler/internal/mutants -jobs=$(JOBS) -only=$(ONLY) -seeds=$(MUTANT_SEEDS)

.PHONY: bench
bench: tools ## the benchmark suite: BENCH lines and a table, each figure against a baseline measured in the same run
	go test -run '^$$' -bench . -benchtime 1x -timeout 30m ./handler/internal/bench

# Azure: ENV names the environment (resource group rg-$(ENV)); LOCATION must offer Flex Consumption.
ENV      ?= convoy-dev
LOCATION ?= eastus2
SB_SKU   ?= Standard
# The alert rules' e-mail (an action group); empty: alerts show in the portal only.
ALERT_EMAIL ?=
# make deploy retries the publish while the app's new role assignments propagate.
DEPLOY_ATTEMPTS ?= 6
DEPLOY_WAIT     ?= 60

# The signed-in principal, granted data access for the tools (publish, replay):
# a user, or a service principal (CI) whose role assignments need principalType
# ServicePrincipal. Prints "<type> <object id>"; nothing for other logins.
define signed_in_principal
case "$$(az account show --query user.type -o tsv 2>/dev/null)" in \
  user) echo "User $$(az ad signed-in-user show --query id -o tsv 2>/dev/null)" ;; \
  servicePrincipal) echo "ServicePrincipal $$(az ad sp show --id "$$(az account show --query user.name -o tsv)" --query id -o tsv 2>/dev/null)" ;; \
esac
endef

# The outputs of the environment's last deployment (empty before the first).
define last_output
az deployment sub show --name $(ENV) --query properties.outputs.$(1).value -o tsv 2>/dev/null
endef

AZ_PARAMS = --name $(ENV) --location $(LOCATION) --template-file infra/main.bicep \
  --parameters environmentName=$(ENV) location=$(LOCATION) serviceBusSku=$(SB_SKU) alertEmail="$(ALERT_EMAIL)" \
  principalType="$${1:-User}" principalId="$$2"

.PHONY: provision
provision: ## provision everything in Azure with Bicep: make provision ENV=convoy-dev LOCATION=eastus2
	@command -v az >/dev/null || { echo "the Azure CLI (az) is needed: https://aka.ms/azcli"; exit 1; }
	@$(MAKE) --no-print-directory ledgers-precheck RG="$$($(call last_output,RESOURCE_GROUP))" SB="$$($(call last_output,SERVICEBUS_NAMESPACE))"
	set -- $$($(signed_in_principal)); \
	az deployment sub create $(AZ_PARAMS) --query properties.outputs -o json

.PHONY: whatif
whatif: ## preview what make provision would create, change or delete (az deployment sub what-if)
	@command -v az >/dev/null || { echo "the Azure CLI (az) is needed: https://aka.ms/azcli"; exit 1; }
	set -- $$($(signed_in_principal)); \
	az deployment sub what-if $(AZ_PARAMS)

# Stops when the namespace still has the sessionless `ledgers` queue of earlier
# versions: requiresSession cannot be changed in place, so the deployment would fail.
.PHONY: ledgers-precheck
ledgers-precheck:
	@if [ -n "$(RG)" ] && [ -n "$(SB)" ] && \
	  [ "$$(az servicebus queue show -g "$(RG)" --namespace-name "$$(echo "$(SB)" | cut -d. -f1)" -n ledgers --query requiresSession -o tsv 2>/dev/null)" = "false" ]; then \
	  echo "The ledgers queue of $(SB) is not session-enabled (an earlier version of convoy), and Azure cannot"; \
	  echo "enable sessions on an existing queue. Stop the ledger senders, let the running app drain the queue,"; \
	  echo "then: make migrate-ledgers ENV=$(ENV) (docs/azure.md: Upgrading an existing environment)."; \
	  exit 1; \
	fi

# Stops, saying so, when the Azure CLI is missing or not signed in.
define need_az
command -v az >/dev/null || { echo "the Azure CLI (az) is needed: https://aka.ms/azcli (then az login)"; exit 1; }; \
az account show >/dev/null 2>&1 || { echo "the Azure CLI is not signed in: az login"; exit 1; }
endef

.PHONY: migrate-ledgers
migrate-ledgers: ## delete the drained sessionless ledgers queue of an earlier version, so that provision recreates it with sessions
	@$(need_az)
	@rg="$(RG)"; sb="$(SB)"; \
	[ -n "$$rg" ] || rg="$$($(call last_output,RESOURCE_GROUP))"; \
	[ -n "$$sb" ] || sb="$$($(call last_output,SERVICEBUS_NAMESPACE))"; \
	[ -n "$$rg" ] && [ -n "$$sb" ] || { echo "no deployment $(ENV): pass RG=<resource group> SB=<namespace>"; exit 1; }; \
	ns="$$(echo "$$sb" | cut -d. -f1)"; \
	errs="$$(mktemp)"; trap 'rm -f "$$errs"' EXIT; \
	out="$$(az servicebus queue show -g "$$rg" --namespace-name "$$ns" -n ledgers \
	  --query "[requiresSession, countDetails.activeMessageCount, countDetails.deadLetterMessageCount, countDetails.scheduledMessageCount]" -o tsv 2>"$$errs")" || { \
	  case "$$(cat "$$errs")" in *ResourceNotFound*|*"was not found"*|*NotFound*) echo "no ledgers queue in $$ns ($$rg): nothing to migrate"; exit 0;; esac; \
	  echo "could not read the ledgers queue of $$ns in $$rg:"; cat "$$errs"; exit 1; }; \
	set -- $$out; \
	case "$$#:$$1" in \
	  4:true) echo "ledgers is already session-enabled: nothing to migrate"; exit 0;; \
	  4:false) ;; \
	  *) echo "unexpected answer from az servicebus queue show (want requiresSession and three counts):"; echo "$$out"; cat "$$errs"; exit 1;; \
	esac; \
	if [ "$$2$$3$$4" != "000" ] && [ "$(FORCE)" != "yes" ]; then \
	  echo "ledgers still holds $$2 active, $$3 dead-lettered and $$4 scheduled message(s): they would be lost."; \
	  echo "Wait for the app to drain it; re-send dead-lettered ledgers after the upgrade (same ledgerId: idempotent)."; \
	  echo "FORCE=yes deletes it anyway."; exit 1; \
	fi; \
	az servicebus queue delete -g "$$rg" --namespace-name "$$ns" -n ledgers && \
	echo "deleted; now make provision (or azd provision), then make deploy (or azd deploy)"

.PHONY: deploy
deploy: stage ## build, stage and publish the app with Core Tools, retrying while new roles propagate: make deploy ENV=convoy-dev (or APP=<name>)
	@command -v func >/dev/null || { echo "Azure Functions Core Tools (func) 4.x is needed"; exit 1; }
	@app="$(APP)"; \
	if [ -z "$$app" ]; then app=$$($(call last_output,FUNCTION_APP_NAME)); fi; \
	[ -n "$$app" ] || { echo "no function app: run make provision first, or pass APP=<name>"; exit 1; }; \
	cd dist && for attempt in $$(seq 1 $(DEPLOY_ATTEMPTS)); do \
	  func azure functionapp publish "$$app" --custom && exit 0; \
	  [ "$$attempt" -lt $(DEPLOY_ATTEMPTS) ] || break; \
	  echo "publish attempt $$attempt of $(DEPLOY_ATTEMPTS) failed; waiting $(DEPLOY_WAIT) s: right after provisioning, the"; \
	  echo "app's role assignments (storage, Service Bus) take minutes to propagate, and until then the host"; \
	  echo "cannot start and Core Tools reports the app unhealthy"; \
	  sleep $(DEPLOY_WAIT); \
	done; \
	echo "publish failed $(DEPLOY_ATTEMPTS) times: see the app's logs (Application Insights, or the portal's Log stream)"; exit 1

.PHONY: teardown
teardown: ## delete the environment's resource group, after asking (YES=1 does not ask): make teardown ENV=convoy-dev
	@$(need_az)
	@rg="$(RG)"; [ -n "$$rg" ] || rg="$$($(call last_output,RESOURCE_GROUP))"; [ -n "$$rg" ] || rg="rg-$(ENV)"; \
	az group show --name "$$rg" >/dev/null 2>&1 || { echo "resource group $$rg does not exist in subscription $$(az account show --query name -o tsv): nothing to delete"; exit 1; }; \
	echo "This deletes resource group $$rg in subscription $$(az account show --query name -o tsv), and everything in it:"; \
	az resource list --resource-group "$$rg" --query "[].[type, name]" -o tsv | sed 's/^/  /'; \
	if [ "$(YES)" != "1" ]; then \
	  printf 'Type the resource group name to delete it: '; \
	  read -r answer || { echo; echo "not deleted: no answer (YES=1 deletes without asking)"; exit 1; }; \
	  [ "$$answer" = "$$rg" ] || { echo "not deleted: $$answer is not $$rg"; exit 1; }; \
	fi; \
	echo "az group delete --name $$rg --yes --no-wait"; az group delete --name "$$rg" --yes --no-wait && \
	echo "deleting $$rg (in the background: az group show --name $$rg shows its state)"

.PHONY: clean
clean: ## remove build output (bin/, dist/, and the staged apps of make devhost and make demo under bin/devhost/)
	rm -rf bin dist
