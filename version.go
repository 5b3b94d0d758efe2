package main

// This file holds harnessd's version, which the command line prints
// and clients, OAuth and webhooks send.

// buildVersion is set at link time with -ldflags "-X main.buildVersion=...".
var buildVersion = "dev"
