// Alert rules on what the app logs (README, "Signals"): log search alerts
// (scheduled query rules) on the Application Insights component, and an
// action group that e-mails alertEmail when it is set.
//
// What Application Insights receives from a custom handler (docs/host-contract.md,
// "Logs"): the Logs of a successful invocation, under the category
// Function.<Name>.User at Information, with the line as the trace's message.
// The AutoReplay timer function always succeeds and writes its lines there:
// "metrics domain=<name> key=value …" for each domain every run,
// "auto-replay paused domain=<name> reason=…" and "auto-replay failed
// domain=<name> <noun>Id=… error=…" (orderId, accountId) when it cannot
// replay. The queries below match those lines exactly (handler/autoreplay.go; the devhost test
// TestAlertQueriesMatchWhatArrives runs the *Query ones against the
// emulation's telemetry). Those rules need lines to fire; the heartbeat rule
// fires on their absence, so a stopped or never-deployed app raises an alert.
//
// One rule per condition, one alert per domain: every query ends with the
// line's domain (domainKql), which each rule splits by (its dimension
// `domain`), so an alert names the domain it is about and one domain's
// alert neither hides nor resolves another's.
param location string
param tags object
param applicationInsightsId string
param namePrefix string

@description('The Application Insights component the rules query, named in their descriptions.')
param applicationInsightsName string

@description('Display name of the workbook (workbook.bicep) that charts what the rules fire on.')
param workbookDisplayName string

@description('E-mail address the alerts are sent to; empty: no action group, the alerts only show in the portal.')
param alertEmail string = ''

@description('Alert when a key (an order, an account, …) has been blocked longer than this many minutes.')
@minValue(1)
param blockedAlertMinutes int = 30

@description('The registered domains (resources.bicep), the default first: each alert fires per domain.')
param domains array

var category = 'Function.AutoReplay.User'

// The domain a line is about: the field domain=<name> the handler writes
// right after the line's prefix (a run of lower-case words: "metrics",
// "auto-replay failed"); anchored there, so that a value further on ("error=…
// domain=x") is never read as one. A line written by a handler older than
// domains has none: it is the default domain's (the first, orders). Not a
// row filter, so not a …Query (the devhost test reads those as filters).
var domainKql = '''
| extend domain = coalesce(extract(@"^[a-z -]* domain=(\w+)", 1, message), "{defaultDomain}")
'''
var domainNames = [for d in domains: d.name]
var byDomain = replace(domainKql, '{defaultDomain}', domainNames[0])

resource actionGroup 'Microsoft.Insights/actionGroups@2023-01-01' = if (!empty(alertEmail)) {
  name: '${namePrefix}-alerts'
  location: 'Global'
  tags: tags
  properties: {
    groupShortName: 'convoy'
    enabled: true
    emailReceivers: [
      {
        name: 'operator'
        emailAddress: alertEmail
        useCommonAlertSchema: true
      }
    ]
  }
}

var blockedQuery = '''
traces
| where tostring(customDimensions.Category) == "{category}"
| where message startswith "metrics "
| extend oldestBlockedSeconds = toint(extract(@"oldestBlockedSeconds=(\d+)", 1, message))
| where oldestBlockedSeconds > {threshold}
'''

var permanentQuery = '''
traces
| where tostring(customDimensions.Category) == "{category}"
| where message startswith "metrics "
| extend deadLettersPermanent = toint(extract(@"deadLettersPermanent=(\d+)", 1, message))
| where deadLettersPermanent > 0
'''

// lagStalledTwoWindows: the orders, among those the run surveyed, judged
// stalled (something waits, no gap, the head has not moved for the window
// LagWindowSeconds) whose head has not moved for two windows or more
// (docs/operations.md, "Lag per order"). A metrics line written before the
// field existed has no match: toint of an empty extract is null, the row is
// dropped, so the rule stays quiet rather than firing on a missing field.
var stalledQuery = '''
traces
| where tostring(customDimensions.Category) == "{category}"
| where message startswith "metrics "
| extend lagStalledTwoWindows = toint(extract(@"lagStalledTwoWindows=(\d+)", 1, message))
| where lagStalledTwoWindows > 0
'''

var failingQuery = '''
traces
| where tostring(customDimensions.Category) == "{category}"
| where message startswith "auto-replay failed" or message startswith "auto-replay paused" or message startswith "auto-replay unrecorded"
'''

// The heartbeat: AutoReplay writes a metrics line for each domain on every
// run (the app setting AutoReplaySchedule: every minute as deployed; with
// AutoReplayEnabled=false too). None of a domain in the rule's window (15
// minutes, that is 15 runs) means no run surveyed it: the app was never
// published or its deployment failed, the host is stopped or cannot start,
// or every run fails (for that domain). The domains that wrote a line are
// taken from the list of those deployed (rightanti: the rows of the list
// without a match), so the query returns one row per silent domain, an
// empty window all of them, and the rule fires on "number of results > 0"
// like the others. (Named …Kql, not …Query: the devhost test reads the
// *Query variables as row filters, which this is not.)
var heartbeatKql = '''
traces
| where tostring(customDimensions.Category) == "{category}"
| where message startswith "metrics "
{byDomain}| distinct domain
| join kind=rightanti (datatable(domain: string) [{domains}]) on domain
'''
var domainList = join(map(domainNames, name => '"${name}"'), ', ')

var rules = [
  {
    name: 'order-blocked'
    displayName: 'convoy: a key (an order, an account, …) is blocked for more than ${blockedAlertMinutes} minutes'
    severity: 2
    query: '${replace(replace(blockedQuery, '{category}', category), '{threshold}', string(blockedAlertMinutes * 60))}${byDomain}'
  }
  {
    name: 'dead-letters-permanent'
    displayName: 'convoy: dead letters of a permanent cause wait for an operator'
    severity: 2
    query: '${replace(permanentQuery, '{category}', category)}${byDomain}'
  }
  {
    name: 'orders-stalled'
    displayName: 'convoy: a key has been stalled for two windows: something waits and its head has not moved'
    severity: 2
    query: '${replace(stalledQuery, '{category}', category)}${byDomain}'
  }
  {
    name: 'auto-replay-failing'
    displayName: 'convoy: automatic replay is failing, paused or cannot record its figures'
    severity: 1
    query: '${replace(failingQuery, '{category}', category)}${byDomain}'
  }
  {
    name: 'app-silent'
    displayName: 'convoy: no metrics line of a domain from AutoReplay for 15 minutes: the app is down, stopped or not deployed, or the domain never surveyed'
    severity: 1
    query: replace(replace(replace(heartbeatKql, '{category}', category), '{byDomain}', byDomain), '{domains}', domainList)
  }
]

resource alertRules 'Microsoft.Insights/scheduledQueryRules@2023-12-01' = [for r in rules: {
  name: '${namePrefix}-${r.name}'
  location: location
  tags: tags
  kind: 'LogAlert'
  properties: {
    displayName: r.displayName
    description: '${r.displayName}. Each alert is one domain\'s (its dimension domain: ${join(domainNames, ', ')}). The trends: see the workbook "${workbookDisplayName}" in the Application Insights resource ${applicationInsightsName} (Workbooks).'
    severity: r.severity
    enabled: true
    scopes: [ applicationInsightsId ]
    evaluationFrequency: 'PT5M'
    windowSize: 'PT15M'
    criteria: {
      allOf: [
        {
          query: r.query
          // One alert per value of the query's domain column.
          dimensions: [
            {
              name: 'domain'
              operator: 'Include'
              values: [ '*' ]
            }
          ]
          timeAggregation: 'Count'
          operator: 'GreaterThan'
          threshold: 0
          failingPeriods: {
            numberOfEvaluationPeriods: 1
            minFailingPeriodsToAlert: 1
          }
        }
      ]
    }
    autoMitigate: true
    actions: {
      actionGroups: empty(alertEmail) ? [] : [ actionGroup.id ]
    }
  }
}]
