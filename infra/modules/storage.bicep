// One storage account: the Functions host (blob), the deployment package
// (blob container) and the program's state tables. No shared keys.
param location string
param tags object
param accountName string
param deploymentContainerName string

@description('The registered domains (resources.bicep): each gets the table named by its table member.')
param domains array

resource account 'Microsoft.Storage/storageAccounts@2023-05-01' = {
  name: accountName
  location: location
  tags: tags
  kind: 'StorageV2'
  sku: { name: 'Standard_LRS' }
  properties: {
    allowSharedKeyAccess: false
    allowBlobPublicAccess: false
    defaultToOAuthAuthentication: true
    minimumTlsVersion: 'TLS1_2'
    supportsHttpsTrafficOnly: true
    publicNetworkAccess: 'Enabled'
    networkAcls: {
      defaultAction: 'Allow'
      bypass: 'AzureServices'
    }
  }
}

resource blobService 'Microsoft.Storage/storageAccounts/blobServices@2023-05-01' = {
  parent: account
  name: 'default'
}

resource deploymentContainer 'Microsoft.Storage/storageAccounts/blobServices/containers@2023-05-01' = {
  parent: blobService
  name: deploymentContainerName
  properties: { publicAccess: 'None' }
}

resource tableService 'Microsoft.Storage/storageAccounts/tableServices@2023-05-01' = {
  parent: account
  name: 'default'
}

// Each domain's state and checkpoints (<Prefix>TableName: ConvoyOrders,
// ConvoyAccounts, …). The orders table keeps its name: a redeployment
// updates it in place (Azure knows it by its name, not the loop's symbol).
resource domainTables 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = [for d in domains: {
  parent: tableService
  name: d.table
}]

// Ledger records and per-key seq counters (LedgersTableName).
resource ledgersTable 'Microsoft.Storage/storageAccounts/tableServices/tables@2023-05-01' = {
  parent: tableService
  name: 'ConvoyLedgers'
}

output accountName string = account.name
output blobEndpoint string = account.properties.primaryEndpoints.blob
output tableServiceUri string = account.properties.primaryEndpoints.table
output deploymentContainerName string = deploymentContainer.name
