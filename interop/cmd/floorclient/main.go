// Command floorclient calls echo({"message":"hello"}) on an MCP server N
// times with the floor client (harnessd/interop/floor: one goroutine, a
// fixed request, no decoding beyond the id) and prints the time per call
// as a Go benchmark line, so benchstat reads it beside harnessd's and the
// Go SDK client's figures. -shape same makes it send the same protocol
// requests as harnessd (floor.SameRequests), and names its line
// BenchmarkFloorSame...
//
// Usage:
//
//	floorclient [-n 3000] [-version 2026-07-28|2025-11-25] [-shape fixed|same] -- SERVER-COMMAND [ARGS...]
//	floorclient [-n 3000] [-version ...] [-shape ...] -url http://127.0.0.1:PORT/mcp
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/exec"
	"time"

	"harnessd/interop/floor"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("floorclient: ")
	n := flag.Int("n", 3000, "calls to make")
	version := flag.String("version", floor.Rev2026, "protocol revision: 2026-07-28 or 2025-11-25")
	shapeName := flag.String("shape", "fixed", "the requests: fixed (the floor's) or same (harnessd's)")
	url := flag.String("url", "", "a Streamable HTTP endpoint (else the command after --, over stdio)")
	flag.Parse()
	if *version != floor.Rev2025 && *version != floor.Rev2026 {
		log.Fatalf("-version %q: want %s or %s", *version, floor.Rev2026, floor.Rev2025)
	}
	shape, prefix := floor.Fixed, "BenchmarkFloor"
	switch *shapeName {
	case "fixed":
	case "same":
		shape, prefix = floor.SameRequests, "BenchmarkFloorSame"
	default:
		log.Fatalf("-shape %q: want fixed or same", *shapeName)
	}
	ctx := context.Background()
	var (
		c    floor.Client
		err  error
		name string
	)
	switch {
	case *url != "":
		c, err = floor.HTTP(ctx, *url, &http.Client{}, *version, shape)
		name = prefix + "HTTP"
	case flag.NArg() > 0:
		cmd := exec.Command(flag.Arg(0), flag.Args()[1:]...)
		cmd.Stderr = os.Stderr
		c, err = floor.Stdio(ctx, cmd, *version, shape)
		name = prefix + "Stdio"
	default:
		log.Fatal("give -url URL or a server command after --")
	}
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	for i := 0; i < *n; i++ {
		if err := c.Call(ctx); err != nil {
			log.Fatalf("call %d: %v", i+1, err)
		}
	}
	elapsed := time.Since(start)
	fmt.Printf("%s/%s \t%d\t%d ns/op\n", name, *version, *n, elapsed.Nanoseconds()/int64(*n))
}
