// Package deploy holds the deployment files (Dockerfile, Prometheus,
// Grafana, Kubernetes); files.go reads the alert rules and the dashboard
// for the tests, and deploy_test.go keeps them and docker-compose.yml in
// step with the code without a Docker engine.
package deploy
