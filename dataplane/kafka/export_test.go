package kafka

// MakeBatch is makeBatch for the external tests.
var MakeBatch = makeBatch
