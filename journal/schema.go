package journal

import (
	"encoding/binary"
	"fmt"
	"strings"

	bolt "go.etcd.io/bbolt"
)

// The names of every bucket and key of the journal. The tree they form is
// drawn in doc.go; change both together.
var (
	bucketMeta = []byte("meta")
	keySchema  = []byte("schema")

	bucketRuns   = []byte("runs")
	keyRun       = []byte("run")
	bucketFacts  = []byte("facts")
	bucketEvents = []byte("events")
)

// A migration raises the schema of a journal by one version, from from to
// from+1, inside the write transaction that found the older schema.
type migration struct {
	from  uint64
	name  string
	apply func(tx *bolt.Tx) error
}

// migrations is the ordered list of every schema change: migrations[i] takes
// a journal from schema i to schema i+1. Append only; every entry needs a case
// in TestMigrations.
var migrations = []migration{
	{from: 0, name: "create buckets", apply: createBuckets},
}

// currentSchema is the schema version this code reads and writes.
var currentSchema = uint64(len(migrations))

// createBuckets lays out schema 1: the meta and runs buckets.
func createBuckets(tx *bolt.Tx) error {
	for _, name := range [][]byte{bucketMeta, bucketRuns} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("create bucket %s: %w", name, err)
		}
	}
	return nil
}

// schemaOf returns the schema version of the journal in tx. A database with
// no buckets at all is schema 0 (new); one with other buckets but no meta
// bucket, or a meta bucket without a valid schema version, is not a journal.
func schemaOf(tx *bolt.Tx) (uint64, error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		var names []string
		err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
			names = append(names, fmt.Sprintf("%q", name))
			return nil
		})
		if err != nil {
			return 0, err
		}
		if len(names) > 0 {
			return 0, fmt.Errorf("no %s bucket, but buckets %s", bucketMeta, strings.Join(names, ", "))
		}
		return 0, nil
	}
	v := meta.Get(keySchema)
	if len(v) != 8 {
		return 0, fmt.Errorf("bucket %s holds no valid %s version", bucketMeta, keySchema)
	}
	return binary.BigEndian.Uint64(v), nil
}

// migrate applies list[have:] to the journal in tx and records the new
// schema version, len(list). Each entry must start from its own index.
func migrate(tx *bolt.Tx, list []migration, have uint64) error {
	if have > uint64(len(list)) {
		return fmt.Errorf("schema %d is newer than %d", have, len(list))
	}
	for i := have; i < uint64(len(list)); i++ {
		m := list[i]
		if m.from != i {
			return fmt.Errorf("migration %d (%s) starts from schema %d, want %d", i, m.name, m.from, i)
		}
		if err := m.apply(tx); err != nil {
			return fmt.Errorf("migrate schema %d -> %d (%s): %w", i, i+1, m.name, err)
		}
	}
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return fmt.Errorf("migrations left no %s bucket", bucketMeta)
	}
	if err := meta.Put(keySchema, itob(uint64(len(list)))); err != nil {
		return fmt.Errorf("write schema version: %w", err)
	}
	return nil
}

// itob encodes v as an 8-byte big-endian key, so that keys sort numerically.
func itob(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}
