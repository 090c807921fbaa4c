# convoy — `make` alone lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

AZURITE_VERSION := 3.35.0
STATICCHECK     := honnef.co/go/tools/cmd/staticcheck@v0.8.2
TOOLS           := $(CURDIR)/.tools
AZURITE_TABLE   := $(TOOLS)/node_modules/.bin/azurite-table
BINARY          := bin/convoy
FUNCTIONS       := $(notdir $(wildcard functions/*))
GO_SOURCES      := $(shell find . -name '*.go' -not -path './.tools/*') go.mod go.sum

export AZURITE_TABLE

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: tools
tools: $(AZURITE_TABLE) ## install project-local tools (Azurite from npm into .tools/)

$(AZURITE_TABLE):
	@mkdir -p $(TOOLS)
	npm install --prefix $(TOOLS) --no-audit --no-fund --loglevel=error azurite@$(AZURITE_VERSION)
	@touch $@

.PHONY: build
build: $(BINARY) ## build the handler: a static linux/amd64 binary in bin/

$(BINARY): $(GO_SOURCES)
	CGO_ENABLED=0 GOOS=linux GOARCH=amd64 go build -trimpath -ldflags='-s -w' -o $@ .

.PHONY: stage
stage: $(BINARY) ## stage the function app in dist/ (what `func azure functionapp publish --custom` uploads)
	rm -rf dist && mkdir -p dist
	cp host.json $(BINARY) dist/
	$(foreach f,$(FUNCTIONS),mkdir -p dist/$(f) && cp functions/$(f)/function.json dist/$(f)/ &&) true
	printf 'local.settings.json\n.funcignore\n' > dist/.funcignore
	@if [ -f local.settings.json ]; then cp local.settings.json dist/; fi
	@echo "staged: $$(cd dist && find . -type f | sort | tr '\n' ' ')"

.PHONY: test
test: tools lint ## lint, then every test (installs Azurite, starts and stops its own servers)
	go test -race -count=1 -timeout 9m ./...

.PHONY: lint
lint: ## gofmt, go vet, staticcheck
	go mod download
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.tools/*')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	go vet ./...
	go run $(STATICCHECK) ./...

.PHONY: start
start: stage ## run the function app with Azure Functions Core Tools (`func start` in dist/)
	@command -v func >/dev/null || { echo "Core Tools (func) is not installed: see README, 'Run with Core Tools'"; exit 1; }
	@[ -f dist/local.settings.json ] || { echo "copy local.settings.json.example to local.settings.json first"; exit 1; }
	cd dist && func start

.PHONY: demo
demo: tools stage ## run the whole pipeline locally on the sample ledgers and check every order
	go run ./handler/devhost/cmd/convoy-devhost demo -app dist -ledgers testdata/ledgers

.PHONY: devhost
devhost: tools stage ## serve the app under the local host + Service Bus emulation until Ctrl-C
	go run ./handler/devhost/cmd/convoy-devhost run -app dist

.PHONY: bench
bench: tools ## the benchmark suite: BENCH lines and a table, each figure against a baseline measured in the same run
	go test -run '^$$' -bench . -benchtime 1x -timeout 20m ./handler/bench

# Azure: ENV names the environment (resource group rg-$(ENV)); LOCATION must offer Flex Consumption.
ENV      ?= convoy-dev
LOCATION ?= eastus2
SB_SKU   ?= Standard

.PHONY: provision
provision: ## provision everything in Azure with Bicep: make provision ENV=convoy-dev LOCATION=eastus2
	@command -v az >/dev/null || { echo "the Azure CLI (az) is needed: https://aka.ms/azcli"; exit 1; }
	az deployment sub create --name $(ENV) --location $(LOCATION) --template-file infra/main.bicep \
	  --parameters environmentName=$(ENV) location=$(LOCATION) serviceBusSku=$(SB_SKU) \
	  principalId="$$(az ad signed-in-user show --query id -o tsv 2>/dev/null)" \
	  --query properties.outputs -o json

.PHONY: deploy
deploy: stage ## build, stage and publish the app with Core Tools: make deploy ENV=convoy-dev (or APP=<name>)
	@command -v func >/dev/null || { echo "Azure Functions Core Tools (func) 4.x is needed"; exit 1; }
	@app="$(APP)"; \
	if [ -z "$$app" ]; then app=$$(az deployment sub show --name $(ENV) --query properties.outputs.FUNCTION_APP_NAME.value -o tsv); fi; \
	[ -n "$$app" ] || { echo "no function app: run make provision first, or pass APP=<name>"; exit 1; }; \
	cd dist && func azure functionapp publish "$$app" --custom

.PHONY: teardown
teardown: ## delete the environment's resource group: make teardown ENV=convoy-dev
	az group delete --name rg-$(ENV) --yes --no-wait

.PHONY: clean
clean: ## remove build output (bin/, dist/)
	rm -rf bin dist
