// Command harnessd runs LLM agent runs started over an HTTP API, with tools
// from external MCP servers that it consumes as an MCP client.
package main

func main() {}
