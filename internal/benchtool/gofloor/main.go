// Command gofloor does nothing: it is the start of any Go program, built as
// sandboxctl is (static), which the help figure times beside sandboxctl
// --help and /bin/true so that the part of the figure no Go client can
// avoid (the runtime's own start) is measured in the same run.
package main

func main() {}
