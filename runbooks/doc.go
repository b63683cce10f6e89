// Package runbooks holds Sluice's on-call runbooks (one Markdown file per
// situation), the Prometheus alerting rules that send an operator to them
// (alerts.yml) and their unit tests (alerts_test.yml). Its Go tests check
// the rules with promtool and run the runbooks' marked shell blocks
// against a real dev stack. Nothing imports it.
package runbooks
