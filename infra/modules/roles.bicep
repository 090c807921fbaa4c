// Least privilege: each role on the narrowest scope a function needs.
param appPrincipalId string
param userPrincipalId string
param userPrincipalType string
param serviceBusNamespaceName string
param storageAccountName string
param applicationInsightsName string

@description('The registered domains (resources.bicep): the app and the user get the same roles on each one\'s queue and table.')
param domains array

// Built-in role definition ids.
var roles = {
  serviceBusDataOwner: '090c5cfd-751d-490a-894a-3ce6f1109419'
  serviceBusDataReceiver: '4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0'
  serviceBusDataSender: '69a216fc-b8fb-44d8-bc22-1f3c2cd27a39'
  storageTableDataContributor: '0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3'
  storageBlobDataOwner: 'b7e6dc6d-f1e8-4753-8033-0f276bb0955b'
  monitoringMetricsPublisher: '3913510d-42f4-4e42-8a64-420c390055eb'
}

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' existing = {
  name: serviceBusNamespaceName
}

resource ledgersQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = {
  parent: namespace
  name: 'ledgers'
}

resource domainQueues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' existing = [for d in domains: {
  parent: namespace
  name: d.queue
}]

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' existing = {
  name: storageAccountName
}

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' existing = {
  parent: account
  name: 'default'
}

resource domainTables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' existing = [for d in domains: {
  parent: tableService
  name: d.table
}]

resource ledgersTable 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' existing = {
  parent: tableService
  name: 'ConvoyLedgers'
}

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// The app's identity is Data Owner of each queue it is triggered by, scoped to
// that queue: receiving needs Listen, and target-based scaling reads the queue's
// runtime properties (message and session counts), which needs Manage; with
// Data Receiver alone the scale controller falls back to incremental scaling
// (HOST-CONTRACT "Scale-out"; Data Owner per queue is also what azd's
// scaffold grants, Azure/azure-dev cli/azd/internal/scaffold/resource_meta.go).
// Owner of a domain's queue (`orders`, `accounts`, …) also covers the
// publisher's and its replay's sends and the replay's reads of the dead-letter
// queue; nothing is granted on the namespace. Each domain's assignments are
// named guid(<its queue or table>.id, principal, role): for orders the names
// of earlier versions, so a redeployment finds them in place.

// LedgerIngest is triggered by the ledgers queue.
resource appLedgersOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ledgersQueue.id, appPrincipalId, roles.serviceBusDataOwner)
  scope: ledgersQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// A domain's processor (OrderProcessor, AccountProcessor, …) is triggered by
// its queue; the publisher (LedgerIngest, LedgerUpload) and its replay
// (ReplayOrder, ReplayAccount, …) send to it; the replay reads its dead letters.
resource appDomainOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in domains: {
  name: guid(domainQueues[i].id, appPrincipalId, roles.serviceBusDataOwner)
  scope: domainQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

// A domain's state (its processor, status, replay, skip functions).
resource appDomainTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in domains: {
  name: guid(domainTables[i].id, appPrincipalId, roles.storageTableDataContributor)
  scope: domainTables[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}]

// Ledger records and seq counters (LedgerIngest, LedgerUpload).
resource appLedgersTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(ledgersTable.id, appPrincipalId, roles.storageTableDataContributor)
  scope: ledgersTable
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// The host's storage (AzureWebJobsStorage: keys, leases) and the deployment package.
resource appBlobOwner 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(account.id, appPrincipalId, roles.storageBlobDataOwner)
  scope: account
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageBlobDataOwner)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Telemetry with Microsoft Entra ID authentication.
resource appMetricsPublisher 'Microsoft.Authorization/roleAssignments@2022-04-01' = {
  name: guid(applicationInsights.id, appPrincipalId, roles.monitoringMetricsPublisher)
  scope: applicationInsights
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.monitoringMetricsPublisher)
    principalId: appPrincipalId
    principalType: 'ServicePrincipal'
  }
}

// Optional: the deploying user publishes ledgers (convoy publish) and
// operates (replay reads dead letters and re-sends; --direct writes state).
resource userLedgersSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(userPrincipalId)) {
  name: guid(ledgersQueue.id, userPrincipalId, roles.serviceBusDataSender)
  scope: ledgersQueue
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}

resource userDomainSender 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in domains: if (!empty(userPrincipalId)) {
  name: guid(domainQueues[i].id, userPrincipalId, roles.serviceBusDataSender)
  scope: domainQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataSender)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}]

resource userDomainReceiver 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in domains: if (!empty(userPrincipalId)) {
  name: guid(domainQueues[i].id, userPrincipalId, roles.serviceBusDataReceiver)
  scope: domainQueues[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.serviceBusDataReceiver)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}]

resource userDomainTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = [for (d, i) in domains: if (!empty(userPrincipalId)) {
  name: guid(domainTables[i].id, userPrincipalId, roles.storageTableDataContributor)
  scope: domainTables[i]
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}]

resource userLedgersTable 'Microsoft.Authorization/roleAssignments@2022-04-01' = if (!empty(userPrincipalId)) {
  name: guid(ledgersTable.id, userPrincipalId, roles.storageTableDataContributor)
  scope: ledgersTable
  properties: {
    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', roles.storageTableDataContributor)
    principalId: userPrincipalId
    principalType: userPrincipalType
  }
}
