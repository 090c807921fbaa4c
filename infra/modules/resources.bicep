// The resources of one environment, in its resource group.
param environmentName string
param location string
param tags object
param serviceBusSku string
param principalId string
param principalType string
param maximumInstanceCount int
param instanceMemoryMB int

var token = toLower(uniqueString(subscription().id, environmentName, location))

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: 'id-${environmentName}'
  location: location
  tags: tags
}

module monitoring 'monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: tags
    workspaceName: 'log-${environmentName}'
    applicationInsightsName: 'appi-${environmentName}'
  }
}

module serviceBus 'servicebus.bicep' = {
  name: 'servicebus'
  params: {
    location: location
    tags: tags
    namespaceName: 'sb-${environmentName}-${token}'
    sku: serviceBusSku
  }
}

module storage 'storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    tags: tags
    accountName: take(toLower('st${replace(environmentName, '-', '')}${token}'), 24)
    deploymentContainerName: 'app-package-${take(token, 8)}'
  }
}

module functionApp 'functionapp.bicep' = {
  name: 'functionapp'
  params: {
    location: location
    tags: tags
    planName: 'plan-${environmentName}'
    appName: 'func-${environmentName}-${take(token, 8)}'
    identityId: identity.id
    identityClientId: identity.properties.clientId
    storageAccountName: storage.outputs.accountName
    blobEndpoint: storage.outputs.blobEndpoint
    tableServiceUri: storage.outputs.tableServiceUri
    deploymentContainerName: storage.outputs.deploymentContainerName
    serviceBusNamespace: serviceBus.outputs.fullyQualifiedNamespace
    ordersMaxMessageBytes: serviceBus.outputs.maxMessageBytes
    applicationInsightsConnectionString: monitoring.outputs.connectionString
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
  }
}

module roles 'roles.bicep' = {
  name: 'roles'
  params: {
    appPrincipalId: identity.properties.principalId
    userPrincipalId: principalId
    userPrincipalType: principalType
    serviceBusNamespaceName: serviceBus.outputs.namespaceName
    storageAccountName: storage.outputs.accountName
    applicationInsightsName: monitoring.outputs.applicationInsightsName
  }
}

output functionAppName string = functionApp.outputs.appName
output functionAppHostName string = functionApp.outputs.defaultHostName
output serviceBusNamespace string = serviceBus.outputs.fullyQualifiedNamespace
output tableServiceUri string = storage.outputs.tableServiceUri
output applicationInsightsName string = monitoring.outputs.applicationInsightsName
output identityClientId string = identity.properties.clientId
