package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden file")

// TestTable reads a recorded `make bench` output and compares the table with the golden file.
func TestTable(t *testing.T) {
	in, err := os.Open(filepath.Join("testdata", "bench.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	res, err := parse(in)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if missed := table(&out, res); missed != 7 {
		t.Errorf("%d figures missed, want 7", missed)
	}
	golden := filepath.Join("testdata", "table.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("table:\n%s\nwant:\n%s", out.Bytes(), want)
	}
}
