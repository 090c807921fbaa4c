// An Application Insights workbook: the trends of the system over time, from
// the lines the deployed app already writes (docs/host-contract.md, "Logs";
// docs/operations.md, "Signals and alerts"):
//
// - AutoReplay's "metrics key=value …" line, every run, under
//   Function.AutoReplay.User (handler.MetricsLine), and its "auto-replay
//   failed / paused / unrecorded" lines;
// - the processor's outcome lines under Function.OrderProcessor.User: one
//   "order message sessionId=… seq=… outcome=… [criticalTimeMs=…]" per
//   message, "order blocked …" / "order unblocked …" per blocking.
//
// Each chart reads a field of a line as the alert rules do,
// extract(@"<field>=(\d+)", 1, message); handler/internal/infracheck
// (workbook_test.go) holds every field a query reads to a field of a line the
// program writes, and runs each extract on such a line, so a renamed field
// fails the build rather than empties a chart.
//
// Microsoft.Insights/workbooks@2023-06-01 as Azure/bicep-types-az has it
// (generated/applicationinsights/microsoft.insights/2023-06-01/types.md):
// kind 'shared'; properties category, displayName, serializedData (a string of
// JSON: the workbook, version Notebook/1.0), sourceId (the resource it opens
// under: the Application Insights component), version, description.
param location string
param tags object
param applicationInsightsId string
param environmentName string

// A workbook's name is its id, a GUID (the portal and Azure's REST examples
// name them so); stable per resource group, so a re-provision updates it.
var workbookName = guid(resourceGroup().id, 'convoy-workbook')
var displayName = 'convoy: ${environmentName}'

var blockedQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.AutoReplay.User"
| where message startswith "metrics "
| extend blockedOrders = toint(extract(@"blockedOrders=(\d+)", 1, message)),
    parkedMessages = toint(extract(@"parkedMessages=(\d+)", 1, message))
| summarize blockedOrders = max(blockedOrders), parkedMessages = max(parkedMessages) by bin(timestamp, 5m)
'''

var deadLettersQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.AutoReplay.User"
| where message startswith "metrics "
| extend transient = toint(extract(@"deadLettersTransient=(\d+)", 1, message)),
    permanent = toint(extract(@"deadLettersPermanent=(\d+)", 1, message))
| summarize transient = max(transient), permanent = max(permanent) by bin(timestamp, 5m)
'''

var lagQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.AutoReplay.User"
| where message startswith "metrics "
| extend ok = toint(extract(@"lagOk=(\d+)", 1, message)),
    catchingUp = toint(extract(@"lagCatchingUp=(\d+)", 1, message)),
    stalled = toint(extract(@"lagStalled=(\d+)", 1, message)),
    blocked = toint(extract(@"lagBlocked=(\d+)", 1, message))
| summarize ok = max(ok), catchingUp = max(catchingUp), stalled = max(stalled), blocked = max(blocked) by bin(timestamp, 5m)
'''

// Critical time (enqueued to applied) of each message applied, from the
// outcome lines: exact percentiles per bin, not an average of AutoReplay's.
// host.json keeps every trace (sampling excludes Trace).
var criticalTimeQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.OrderProcessor.User"
| where message startswith "order message "
| where extract(@"outcome=(\w+)", 1, message) == "applied"
| extend criticalTimeMs = tolong(extract(@"criticalTimeMs=(\d+)", 1, message))
| where isnotnull(criticalTimeMs)
| summarize p50 = percentile(criticalTimeMs, 50), p99 = percentile(criticalTimeMs, 99) by bin(timestamp, 5m)
'''

var appliedQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.OrderProcessor.User"
| where message startswith "order message "
| where extract(@"outcome=(\w+)", 1, message) == "applied"
| summarize applied = count() by bin(timestamp, 1m)
'''

var blockingsQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.OrderProcessor.User"
| where message startswith "order blocked " or message startswith "order unblocked "
| summarize blocked = countif(message startswith "order blocked "), unblocked = countif(message startswith "order unblocked ") by bin(timestamp, 5m)
'''

var autoReplayTrendQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.AutoReplay.User"
| where message startswith "auto-replay failed" or message startswith "auto-replay paused" or message startswith "auto-replay unrecorded"
| summarize failed = countif(message startswith "auto-replay failed"), paused = countif(message startswith "auto-replay paused"), unrecorded = countif(message startswith "auto-replay unrecorded") by bin(timestamp, 5m)
'''

var autoReplayLinesQuery = '''
traces
| where tostring(customDimensions.Category) == "Function.AutoReplay.User"
| where message startswith "auto-replay failed" or message startswith "auto-replay paused" or message startswith "auto-replay unrecorded"
| project timestamp, message
| order by timestamp desc
| take 100
'''

// One query of the workbook (a KqlItem, type 3) on the Application Insights
// component (queryType 0: Logs), over the workbook's time range.
func chart(name string, title string, query string, visualization string) object => {
  type: 3
  name: name
  content: {
    version: 'KqlItem/1.0'
    title: title
    query: query
    size: 0
    queryType: 0
    resourceType: 'microsoft.insights/components'
    visualization: visualization
    timeContextFromParameter: 'TimeRange'
    timeContext: { durationMs: 14400000 }
  }
}

var workbook = {
  version: 'Notebook/1.0'
  items: [
    {
      type: 1
      name: 'intro'
      content: {
        version: 'MarkdownItem/1.0'
        json: '## convoy\nTrends from the lines the app writes: AutoReplay\'s `metrics` line (every run) and the processor\'s outcome lines. The numbers of now, the blocked orders and their actions are on the dashboard (`/api/dashboard`); what each figure means: docs/operations.md.'
      }
    }
    {
      type: 9
      name: 'parameters'
      content: {
        version: 'KqlParameterItem/1.0'
        style: 'pills'
        queryType: 0
        resourceType: 'microsoft.insights/components'
        parameters: [
          {
            id: '6a3c1f0e-2b7d-4c59-9e8a-0d4f5b1c7e21'
            version: 'KqlParameterItem/1.0'
            name: 'TimeRange'
            label: 'Time range'
            type: 4
            isRequired: true
            value: { durationMs: 14400000 }
            typeSettings: {
              allowCustom: true
              selectableValues: [
                { durationMs: 3600000 }
                { durationMs: 14400000 }
                { durationMs: 43200000 }
                { durationMs: 86400000 }
                { durationMs: 259200000 }
                { durationMs: 604800000 }
              ]
            }
          }
        ]
      }
    }
    chart('blocked', 'Blocked orders and parked messages (metrics line, max per 5 min)', blockedQuery, 'timechart')
    chart('dead-letters', 'Dead letters by cause: transient (AutoReplay replays them) and permanent (an operator must act)', deadLettersQuery, 'timechart')
    chart('lag', 'Orders by lag status: ok, catching up, stalled, blocked', lagQuery, 'timechart')
    chart('critical-time', 'Critical time, enqueued to applied: p50 and p99 (ms)', criticalTimeQuery, 'timechart')
    chart('applied', 'Messages applied per minute', appliedQuery, 'timechart')
    chart('blockings', 'Orders blocked and unblocked (per 5 min)', blockingsQuery, 'timechart')
    chart('auto-replay', 'AutoReplay failed, paused or unable to record its figures (per 5 min)', autoReplayTrendQuery, 'timechart')
    chart('auto-replay-lines', 'AutoReplay\'s latest failed, paused and unrecorded lines', autoReplayLinesQuery, 'table')
  ]
}

resource convoyWorkbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  name: workbookName
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: displayName
    category: 'workbook'
    description: 'Trends of convoy (${environmentName}): blocked orders, parked messages, dead letters by cause, lag statuses, critical time, messages applied, AutoReplay failures.'
    version: 'Notebook/1.0'
    sourceId: applicationInsightsId
    serializedData: string(workbook)
  }
}

output name string = convoyWorkbook.name
output displayName string = displayName
output id string = convoyWorkbook.id
