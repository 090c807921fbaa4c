// convoy: everything the Sequential Convoy needs, identity-based, no keys.
// Deploy at subscription scope: `make provision` (az) or `azd up`.
targetScope = 'subscription'

// Any name azd accepts: 1-64 of letters, digits and - _ . ( ) (Azure/azure-dev,
// cli/azd/pkg/environment/environment.go, EnvironmentNameRegexp). Every resource
// name is derived from it in modules/resources.bicep, made safe for its type.
@minLength(1)
@maxLength(64)
@description('Name of the environment (azd\'s AZURE_ENV_NAME): 1-64 letters, digits and - _ . ( ); resource names are derived from it.')
param environmentName string

// azd's location metadata: azd prompts for a location and fills AZURE_LOCATION
// (Azure/azure-dev, cli/azd/pkg/azure/arm_template.go, AzdMetadataTypeLocation).
@minLength(1)
@metadata({ azd: { type: 'location' } })
@description('Azure region of every resource; must offer the Flex Consumption plan.')
param location string

@allowed(['Standard', 'Premium'])
@description('Service Bus tier: Standard (256 KiB messages) or Premium (isolated capacity, larger messages).')
param serviceBusSku string = 'Standard'

@description('Object id of the deploying user or group, granted data access for local runs and operations (publish, replay); empty for none.')
param principalId string = ''

// azd passes AZURE_PRINCIPAL_TYPE (User, or ServicePrincipal when signed in as
// one, e.g. in CI) through main.parameters.json; a role assignment whose
// principalType does not match the principal fails (UnmatchedPrincipalType).
@allowed(['User', 'Group', 'ServicePrincipal'])
@description('Type of principalId: User, Group or ServicePrincipal.')
param principalType string = 'User'

// Flex Consumption accepts 40-1000 (the bounds of Microsoft's Flex template,
// Azure/azure-quickstart-templates quickstarts/microsoft.web/function-app-flex-managed-identities/main.bicep).
@minValue(40)
@maxValue(1000)
@description('Largest number of Flex Consumption instances (40-1000).')
param maximumInstanceCount int = 40

@allowed([512, 2048, 4096])
param instanceMemoryMB int = 2048

@description('E-mail address for the alert rules (an action group); empty: alerts show in the portal only.')
param alertEmail string = ''

@minValue(1)
@description('Alert when a key (an order, an account, …) has been blocked longer than this many minutes.')
param blockedAlertMinutes int = 30

// The domains the app runs, as handler/domains.All registers them, in its
// order: the first is the default (a line or a ledger entry that names no
// domain is its). Each gets its own queue (its name), table (Convoy<Name>,
// first letter upper-cased), app settings (<Name>QueueName, <Name>TableName,
// <Name>MaxMessageBytes), data roles on them, and its own alert instances:
// a new domain is one more name here (handler/internal/infracheck holds this
// list to the registered domains and their functions).
@minLength(1)
@description('Names of the registered domains (handler/domains.All), the default first: one queue, table, settings and alerts each.')
param domains array = [
  'orders'
  'accounts'
]

var tags = { 'azd-env-name': environmentName, app: 'convoy' }

// Resource group names allow every character azd allows, up to 90, but cannot
// end with a period (Azure/bicep-types-az, Microsoft.Resources/resourceGroups@2024-03-01:
// pattern ^[-\w\._\(\)]+$; MicrosoftDocs/azure-docs resource-name-rules.md).
var resourceGroupName = endsWith(environmentName, '.') ? 'rg-${environmentName}0' : 'rg-${environmentName}'

resource rg 'Microsoft.Resources/resourceGroups@2024-03-01' = {
  name: resourceGroupName
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
    alertEmail: alertEmail
    blockedAlertMinutes: blockedAlertMinutes
    domains: domains
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
