// The function app: Flex Consumption, Linux, runtime "custom" (the Go
// handler), running as the user-assigned identity. Every connection is
// identity-based, with the setting names the program and bindings read.
param location string
param tags object
param planName string
param appName string
param identityId string
param identityClientId string
param blobEndpoint string
param tableServiceUri string
param deploymentContainerName string
param serviceBusNamespace string

@description('The namespace\'s message size limit, which every domain\'s queue has.')
param maxMessageBytes int

@description('The registered domains (resources.bicep): each gets its <Prefix>QueueName, <Prefix>TableName and <Prefix>MaxMessageBytes.')
param domains array
@secure()
param applicationInsightsConnectionString string
param maximumInstanceCount int
param instanceMemoryMB int

resource plan 'Microsoft.Web/serverfarms@2024-04-01' = {
  name: planName
  location: location
  tags: tags
  kind: 'functionapp'
  sku: {
    tier: 'FlexConsumption'
    name: 'FC1'
  }
  properties: {
    reserved: true
  }
}

resource app 'Microsoft.Web/sites@2024-04-01' = {
  name: appName
  location: location
  tags: tags
  kind: 'functionapp,linux'
  identity: {
    type: 'UserAssigned'
    userAssignedIdentities: { '${identityId}': {} }
  }
  properties: {
    serverFarmId: plan.id
    httpsOnly: true
    // Nothing here that Flex refuses: no ftpsState (FTPS is not supported on
    // Flex), no alwaysOn, linuxFxVersion, use32BitWorkerProcess, … (the list,
    // with its source, is in handler/internal/infracheck).
    siteConfig: {
      minTlsVersion: '1.2'
    }
    functionAppConfig: {
      deployment: {
        storage: {
          type: 'blobContainer'
          value: '${blobEndpoint}${deploymentContainerName}'
          authentication: {
            type: 'UserAssignedIdentity'
            userAssignedIdentityResourceId: identityId
          }
        }
      }
      scaleAndConcurrency: {
        maximumInstanceCount: maximumInstanceCount
        instanceMemoryMB: instanceMemoryMB
      }
      runtime: {
        name: 'custom'
        version: '1.0'
      }
    }
  }
}

// Each domain's settings, named as handler/settings reads them (Prefix:
// OrdersQueueName, AccountsTableName, …); its processor's function.json
// reads the queue's (%AccountsQueueName%).
var domainSettings = reduce(domains, {}, (settings, d) => union(settings, {
  '${d.prefix}QueueName': d.queue
  '${d.prefix}TableName': d.table
  '${d.prefix}MaxMessageBytes': string(maxMessageBytes)
}))

resource appSettings 'Microsoft.Web/sites/config@2024-04-01' = {
  parent: app
  name: 'appsettings'
  // No setting that Flex refuses (FUNCTIONS_WORKER_RUNTIME, WEBSITE_RUN_FROM_PACKAGE, …:
  // the runtime and the package are in functionAppConfig). Endpoints come
  // from the resources, never built from a DNS suffix (sovereign clouds).
  properties: union({
    AzureWebJobsStorage__blobServiceUri: blobEndpoint
    AzureWebJobsStorage__credential: 'managedidentity'
    AzureWebJobsStorage__clientId: identityClientId
    ServiceBusConnection__fullyQualifiedNamespace: serviceBusNamespace
    ServiceBusConnection__credential: 'managedidentity'
    ServiceBusConnection__clientId: identityClientId
    StateStorage__tableServiceUri: tableServiceUri
    StateStorage__credential: 'managedidentity'
    StateStorage__clientId: identityClientId
    LedgersQueueName: 'ledgers'
    LedgersTableName: 'ConvoyLedgers'
    // AutoReplay's schedule (%AutoReplaySchedule% in its function.json: the
    // host refuses the function without it) and its switch.
    AutoReplaySchedule: '0 */1 * * * *'
    AutoReplayEnabled: 'true'
    // Flex may not set WEBSITE_INSTANCE_ID, by which the program recognises
    // App Service: the log format is chosen here, not guessed.
    LogFormat: 'json'
    // The host drops the handler's stdout (Information) with the shipped
    // host.json, and outcome lines reach Application Insights through each
    // successful call's Logs: formatting them on stdout too would be wasted CPU.
    LogLevel: 'warn'
    APPLICATIONINSIGHTS_CONNECTION_STRING: applicationInsightsConnectionString
    APPLICATIONINSIGHTS_AUTHENTICATION_STRING: 'ClientId=${identityClientId};Authorization=AAD'
  }, domainSettings)
}

output appName string = app.name
output defaultHostName string = app.properties.defaultHostName
