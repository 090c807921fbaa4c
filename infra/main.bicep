// convoy: everything the Sequential Convoy needs, identity-based, no keys.
// Deploy at subscription scope: `make provision` (az) or `azd up`.
targetScope = 'subscription'

@minLength(1)
@maxLength(40)
@description('Name of the environment, used in resource names (letters, digits, hyphens).')
param environmentName string

@minLength(1)
@description('Azure region of every resource; must offer the Flex Consumption plan.')
param location string

@allowed(['Standard', 'Premium'])
@description('Service Bus tier: Standard (256 KiB messages) or Premium (isolated capacity, larger messages).')
param serviceBusSku string = 'Standard'

@description('Object id of the deploying user or group, granted data access for local runs and operations (publish, replay); empty for none.')
param principalId string = ''

@allowed(['User', 'Group', 'ServicePrincipal'])
param principalType string = 'User'

@description('Largest number of Flex Consumption instances.')
param maximumInstanceCount int = 40

@allowed([512, 2048, 4096])
param instanceMemoryMB int = 2048

var tags = { 'azd-env-name': environmentName, app: 'convoy' }

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: 'rg-${environmentName}'
  location: location
  tags: tags
}

module resources 'modules/resources.bicep' = {
  name: 'convoy-resources'
  scope: rg
  params: {
    environmentName: environmentName
    location: location
    tags: tags
    serviceBusSku: serviceBusSku
    principalId: principalId
    principalType: principalType
    maximumInstanceCount: maximumInstanceCount
    instanceMemoryMB: instanceMemoryMB
  }
}

output AZURE_LOCATION string = location
output RESOURCE_GROUP string = rg.name
output FUNCTION_APP_NAME string = resources.outputs.functionAppName
output FUNCTION_APP_HOSTNAME string = resources.outputs.functionAppHostName
output SERVICEBUS_NAMESPACE string = resources.outputs.serviceBusNamespace
output STATE_TABLE_SERVICE_URI string = resources.outputs.tableServiceUri
output APPLICATIONINSIGHTS_NAME string = resources.outputs.applicationInsightsName
output MANAGED_IDENTITY_CLIENT_ID string = resources.outputs.identityClientId
