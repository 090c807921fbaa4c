// The resources of one environment, in its resource group.
param environmentName string
param location string
param tags object
param serviceBusSku string
param principalId string
param principalType string
param maximumInstanceCount int
param instanceMemoryMB int
param alertEmail string
param blockedAlertMinutes int
param domains array

// Resource names. azd accepts environment names of 1-64 characters of
// [a-zA-Z0-9-()_.]; every type below accepts less (lengths and alphabets:
// Azure/bicep-types-az generated/*/types.md where the type carries them,
// MicrosoftDocs/azure-docs articles/azure-resource-manager/management/resource-name-rules.md
// for the rest; handler/internal/infracheck computes each name for the oddest names azd
// accepts). One sanitised base (lower case, every other character a hyphen),
// cut per type by fit(), which never leaves a trailing hyphen; the uniqueness
// token stays whole at the end of each globally unique name, so that two
// environments of the same name in different subscriptions never collide.
// For a short lower-case environment name these are the names of earlier
// versions, so an existing environment keeps its resources.
var token = toLower(uniqueString(subscription().id, environmentName, location)) // 13 of [a-z0-9]
var base = replace(replace(replace(replace(toLower(environmentName), '_', '-'), '.', '-'), '(', '-'), ')', '-')
var alphanumeric = replace(base, '-', '')

// At most n characters of s, ending with a letter or a digit.
func fit(s string, n int) string => endsWith(take(s, n), '-') ? '${take(s, n - 1)}0' : take(s, n)

var names = {
  identity: 'id-${fit(base, 60)}' // 3-128, letters, digits, - _
  workspace: 'log-${fit(base, 59)}' // 4-63, ^[A-Za-z0-9][A-Za-z0-9-]+[A-Za-z0-9]$
  applicationInsights: 'appi-${fit(base, 60)}' // 1-260
  serviceBus: 'sb-${fit(base, 33)}-${token}' // global, 6-50, letters, digits, hyphens, letter first, letter or digit last
  storage: 'st${take(alphanumeric, 9)}${token}' // global, 3-24, ^[a-z0-9]+$
  deploymentContainer: 'app-package-${take(token, 8)}' // 3-63, lower case, digits, single hyphens
  plan: 'plan-${fit(base, 55)}' // 1-60, letters, digits, hyphens
  functionApp: 'func-${fit(base, 46)}-${take(token, 8)}' // global, 2-60, letters, digits, hyphens, no hyphen first or last
  alerts: 'alert-${fit(base, 60)}' // prefix of the alert rules and the action group: 1-260, letters, digits, hyphens
}

// What each domain has, named as the program names it (handler/settings:
// Prefix, DefaultQueue, DefaultTable): its name, the prefix of its settings
// (the name, first letter upper-cased: Orders), its queue (the name) and its
// table (Convoy<Prefix>). Every module reads these; none derives a name again.
var prefixes = [for name in domains: '${toUpper(take(name, 1))}${skip(name, 1)}']
var domainResources = [for (name, i) in domains: {
  name: name
  prefix: prefixes[i]
  queue: name
  table: 'Convoy${prefixes[i]}'
}]

resource identity 'Microsoft.ManagedIdentity/userAssignedIdentities@2023-01-31' = {
  name: names.identity
  location: location
  tags: tags
}

module monitoring 'monitoring.bicep' = {
  name: 'monitoring'
  params: {
    location: location
    tags: tags
    workspaceName: names.workspace
    applicationInsightsName: names.applicationInsights
  }
}

// The trends in Azure: a workbook under the Application Insights component.
module workbook 'workbook.bicep' = {
  name: 'workbook'
  params: {
    location: location
    tags: tags
    applicationInsightsId: monitoring.outputs.applicationInsightsId
    environmentName: environmentName
  }
}

module alerts 'alerts.bicep' = {
  name: 'alerts'
  params: {
    location: location
    tags: tags
    applicationInsightsId: monitoring.outputs.applicationInsightsId
    applicationInsightsName: monitoring.outputs.applicationInsightsName
    workbookDisplayName: workbook.outputs.displayName
    namePrefix: names.alerts
    alertEmail: alertEmail
    blockedAlertMinutes: blockedAlertMinutes
    domains: domainResources
  }
}

module serviceBus 'servicebus.bicep' = {
  name: 'servicebus'
  params: {
    location: location
    tags: tags
    namespaceName: names.serviceBus
    sku: serviceBusSku
    domains: domainResources
  }
}

module storage 'storage.bicep' = {
  name: 'storage'
  params: {
    location: location
    tags: tags
    accountName: names.storage
    deploymentContainerName: names.deploymentContainer
    domains: domainResources
  }
}

module functionApp 'functionapp.bicep' = {
  name: 'functionapp'
  params: {
    location: location
    tags: tags
    planName: names.plan
    appName: names.functionApp
    identityId: identity.id
    identityClientId: identity.properties.clientId
    blobEndpoint: storage.outputs.blobEndpoint
    tableServiceUri: storage.outputs.tableServiceUri
    deploymentContainerName: storage.outputs.deploymentContainerName
    serviceBusNamespace: serviceBus.outputs.fullyQualifiedNamespace
    maxMessageBytes: serviceBus.outputs.maxMessageBytes
    domains: domainResources
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
    domains: domainResources
  }
}

output functionAppName string = functionApp.outputs.appName
output functionAppHostName string = functionApp.outputs.defaultHostName
output serviceBusNamespace string = serviceBus.outputs.fullyQualifiedNamespace
output tableServiceUri string = storage.outputs.tableServiceUri
output applicationInsightsName string = monitoring.outputs.applicationInsightsName
output identityClientId string = identity.properties.clientId
