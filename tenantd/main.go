// Command tenantd is the one Sluice binary; its roles are subcommands.
package main

func main() {}
