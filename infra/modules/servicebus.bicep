// The Service Bus namespace, the ledgers queue and one queue per domain
// (names: docs/contract.md).
param location string
param tags object
param namespaceName string

@description('The registered domains (resources.bicep): each gets the queue named by its queue member.')
param domains array

@allowed(['Standard', 'Premium'])
param sku string

resource namespace 'Microsoft.ServiceBus/namespaces@2024-01-01' = {
  name: namespaceName
  location: location
  tags: tags
  sku: {
    name: sku
    tier: sku
    capacity: sku == 'Premium' ? 1 : null
  }
  properties: {
    disableLocalAuth: true
    minimumTlsVersion: '1.2'
    publicNetworkAccess: 'Enabled'
  }
}

// Ledgers: one session per stream (the ledger's `stream` is its SessionId),
// so that the ledgers of one stream are de-batched one after the other. A
// ledger may take minutes to publish, hence the longest lock; resends of the
// same ledgerId are dropped for 10 minutes.
// requiresSession cannot be changed on an existing queue: a namespace that
// still has the sessionless `ledgers` of earlier versions must have it drained
// and deleted first (`make migrate-ledgers`, README "Upgrading"); `make
// provision` and azd's preprovision hook stop before the deployment if it is there.
resource ledgersQueue 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = {
  parent: namespace
  name: 'ledgers'
  properties: {
    requiresSession: true
    lockDuration: 'PT5M'
    maxDeliveryCount: 10
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    defaultMessageTimeToLive: 'P14D'
    deadLetteringOnMessageExpiration: true
    enablePartitioning: false
    enableBatchedOperations: true
  }
}

// One queue per domain (orders, accounts, …): one session per key (an order,
// an account), so that one domain's poison message or backlog never holds up
// another's keys. maxDeliveryCount 10 is the budget of fast redeliveries
// before a message is dead-lettered (the handler already retries transient
// failures inside each delivery); an expired message is dead-lettered, not
// dropped, so that it can be replayed into its gap. Not partitioned, so that
// a batch may carry messages of many sessions. The loop names each queue as
// before (the orders queue stays `orders`): a redeployment updates it in
// place, Azure knows a resource by its name, not by the template's symbol.
resource domainQueues 'Microsoft.ServiceBus/namespaces/queues@2024-01-01' = [for d in domains: {
  parent: namespace
  name: d.queue
  properties: {
    requiresSession: true
    lockDuration: 'PT1M'
    maxDeliveryCount: 10
    requiresDuplicateDetection: true
    duplicateDetectionHistoryTimeWindow: 'PT10M'
    defaultMessageTimeToLive: 'P14D'
    deadLetteringOnMessageExpiration: true
    enablePartitioning: false
    enableBatchedOperations: true
  }
}]

output namespaceName string = namespace.name
// The host name from the namespace's own endpoint (https://<name>.servicebus.windows.net:443/
// in the public cloud; other suffixes in sovereign clouds).
output fullyQualifiedNamespace string = split(split(replace(namespace.properties.serviceBusEndpoint, 'https://', ''), ':')[0], '/')[0]
// Standard caps messages at 256 KiB; Premium defaults to 1 MiB.
output maxMessageBytes int = sku == 'Premium' ? 1048576 : 262144
