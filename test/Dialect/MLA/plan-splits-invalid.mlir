// RUN: mla-opt %s --split-input-file --mla-plan-splits="policy=round-robin" -verify-diagnostics

// expected-error @below {{mla-plan-splits: unknown policy 'round-robin' (expected heuristic, balanced, batch-invariant or auto)}}
module {
}
