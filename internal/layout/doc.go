// Package layout holds no code. Its test enforces the import rules that make
// the tree read as the architecture (docs/development.md):
//
//   - the limiter side (internal/dc, cmd/limiter) and the control plane
//     (internal/control, cmd/coordinator) never import each other; they meet
//     only in proto/, the rule model in pkg/ and the etcd state in
//     internal/etcd;
//   - the public Go API (pkg/) imports nothing of the module's internal/;
//   - product code never imports a test kit (internal/testkit).
package layout
