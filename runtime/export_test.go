package runtime

// StoreKey exposes the changelog key of a store entry to the external tests.
var StoreKey = storeKey

// ErrorCode exposes the librdkafka error code classifier to the external
// tests.
var ErrorCode = errorCode
