package postgres

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
)

// Every wrong setting is named in the error, with why; a valid one
// parses to what it says.
func TestSettingsAreCheckedByName(t *testing.T) {
	url := "postgres://u@127.0.0.1:5432/db"
	tests := []struct {
		name  string
		give  map[string]string
		field string // the setting the error names; "" for none
		want  string
	}{
		{name: "valid", give: map[string]string{ConnectionURL: url, PKMode: "record_key", InsertMode: "upsert", DeleteEnabled: "true"}},
		{name: "no url", give: map[string]string{}, field: ConnectionURL, want: "is required"},
		{name: "bad url", give: map[string]string{ConnectionURL: "postgres://u@[::1"}, field: ConnectionURL},
		{name: "unknown mode", give: map[string]string{ConnectionURL: url, InsertMode: "merge"}, field: InsertMode, want: `"merge" is not one of insert, upsert, update`},
		{name: "not a number", give: map[string]string{ConnectionURL: url, BatchSize: "many"}, field: BatchSize, want: "not a whole number"},
		{name: "batch of none", give: map[string]string{ConnectionURL: url, BatchSize: "0"}, field: BatchSize, want: "at least 1"},
		{name: "not a boolean", give: map[string]string{ConnectionURL: url, DeleteEnabled: "yes please"}, field: DeleteEnabled, want: "not true or false"},
		{name: "modes in capitals, as Connect takes them", give: map[string]string{ConnectionURL: url, PKMode: "RECORD_KEY", InsertMode: "UPSERT", DBTimezoneDate: "utc"}},
		{name: "a value key of the table's", give: map[string]string{ConnectionURL: url, PKMode: "record_value", InsertMode: "update"}},
		{name: "a JDBC URL", give: map[string]string{ConnectionURL: "jdbc:postgresql://db.example:5433/shop?user=u&password=p&sslmode=disable", ConnectionUser: "v", ConnectionPassword: "q"}},
		{name: "a JDBC URL of another database", give: map[string]string{ConnectionURL: "jdbc:mysql://db.example/shop"}, field: ConnectionURL, want: "only PostgreSQL"},
		{name: "kafka key of two columns", give: map[string]string{ConnectionURL: url, PKMode: "kafka", PKFields: "t,p"}, field: PKFields, want: "three names"},
		{name: "unquoted names", give: map[string]string{ConnectionURL: url, QuoteIdentifiers: "never"}, field: QuoteIdentifiers, want: `only "always"`},
		{name: "another dialect", give: map[string]string{ConnectionURL: url, DialectName: "MySqlDatabaseDialect"}, field: DialectName, want: "is not one of PostgreSqlDatabaseDialect"},
		{name: "an unknown zone", give: map[string]string{ConnectionURL: url, DBTimezone: "Mars/Olympus"}, field: DBTimezone, want: "unknown time zone"},
		{name: "an unknown table type", give: map[string]string{ConnectionURL: url, TableTypes: "TABLE,SYNONYM"}, field: TableTypes, want: `"SYNONYM"`},
		{name: "no attempts", give: map[string]string{ConnectionURL: url, ConnectionAttempts: "0"}, field: ConnectionAttempts, want: "at least 1"},
		{name: "deletes without a key", give: map[string]string{ConnectionURL: url, DeleteEnabled: "true"}, field: DeleteEnabled, want: "needs pk.mode record_key"},
		{name: "upsert without a key", give: map[string]string{ConnectionURL: url, InsertMode: "upsert"}, field: InsertMode, want: "needs a primary key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Sink{}.Config().Parse(tt.give)
			if err == nil {
				_, err = parse(cfg)
			}
			if tt.field == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, connect.ErrInvalidConfig)
			var fe *connect.FieldError
			require.True(t, errors.As(err, &fe), "%v", err)
			assert.Equal(t, tt.field, fe.Field)
			assert.Contains(t, err.Error(), tt.field)
			assert.Contains(t, fe.Reason, tt.want)
		})
	}
}

// Validate reports every setting, given or defaulted, with its errors,
// and counts them, as Kafka Connect's validate endpoint does.
func TestValidateReportsEverySetting(t *testing.T) {
	v := Sink{}.Config().Validate(map[string]string{InsertMode: "merge"})
	assert.Equal(t, 2, v.ErrorCount, "the missing url and the unknown mode")
	byName := map[string]connect.Value{}
	for _, val := range v.Values {
		byName[val.Key.Name] = val
	}
	assert.Len(t, byName, len(Sink{}.Config().Keys))
	assert.Equal(t, "3000", byName[BatchSize].Value)
	assert.False(t, byName[BatchSize].Given)
	assert.NotEmpty(t, byName[ConnectionURL].Errors)
	assert.NotEmpty(t, byName[InsertMode].Errors)
	assert.Empty(t, byName[PKMode].Errors)
}

// A JDBC URL connects where the PostgreSQL JDBC driver would: its host,
// port and database, its user and password parameters (overridden by
// connection.user and connection.password), its other parameters passed
// on.
func TestJDBCURLsConnectWhereTheDriverWould(t *testing.T) {
	pc, err := poolConfig("jdbc:postgresql://db.example:5433/shop?user=u&password=p&sslmode=disable&application_name=sink", "", "")
	require.NoError(t, err)
	cc := pc.ConnConfig
	assert.Equal(t, "db.example", cc.Host)
	assert.EqualValues(t, 5433, cc.Port)
	assert.Equal(t, "shop", cc.Database)
	assert.Equal(t, "u", cc.User)
	assert.Equal(t, "p", cc.Password)
	assert.Nil(t, cc.TLSConfig, "sslmode=disable")
	assert.Equal(t, "sink", cc.RuntimeParams["application_name"])

	pc, err = poolConfig("jdbc:postgresql://db.example/shop?user=u&password=p", "v", "q")
	require.NoError(t, err)
	assert.Equal(t, "v", pc.ConnConfig.User)
	assert.Equal(t, "q", pc.ConnConfig.Password)
	assert.EqualValues(t, 5432, pc.ConnConfig.Port)

	pc, err = poolConfig("host=db.example dbname=shop", "v", "")
	require.NoError(t, err)
	assert.Equal(t, "v", pc.ConnConfig.User)
	assert.Equal(t, "shop", pc.ConnConfig.Database)
}

// insert.mode and pk.mode are read in any case, as Kafka Connect's enum
// settings are.
func TestModesAreReadInAnyCase(t *testing.T) {
	cfg, err := Sink{}.Config().Parse(map[string]string{ConnectionURL: "postgres://u@h/db", InsertMode: "UPSERT", PKMode: "Record_Key"})
	require.NoError(t, err)
	s, err := parse(cfg)
	require.NoError(t, err)
	assert.True(t, s.upsert)
	assert.Equal(t, "record_key", s.pkMode)
}
