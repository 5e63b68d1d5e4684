package schema

// The id tests live in package schema_test because they compile Permify schemas too,
// and the Permify compiler imports this package.
var (
	SharedSchemas = sharedSchemas
	SharedDir     = sharedDir
)
