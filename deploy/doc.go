// Package deploy holds the deployment files (Dockerfile, Prometheus,
// Grafana, Kubernetes) and, in deploy_test.go, the check that keeps them
// and docker-compose.yml in step with the code without a Docker engine.
package deploy
