// Independent cases of one shape as one executor request: one kernel call for many cases.
//
// Where it sits: between the pair backend (pair_backend.cc), whose run_many hands each case to
// Adapter::call_batched, and the exchange (exchange.h), which writes the request. Cases batch
// when their model (dtype, heads, dims, page size, layer kinds, sm_scale, soft cap) and their
// plan's structure (Family::batch_shape: the calls and their flags, whatever the batch mode that
// made them; a kernel sees rows, not modes) are equal: their rows are concatenated, their tokens
// and pool slots offset into one pool (Family::merge), and the outputs split back. Each case then
// reads, in the batch's pool, exactly the keys it read alone. A case's value sets (its own, the
// read-set probes') are runs of the batch too, each with its own tokens and pools: one kernel call
// for all of them (a request with one value set), however many a case has.
//
//   const std::string key = batch_key(family, plan, inputs, variant);   // "": runs alone
//   BatchMember me{..., &plan, &inputs, &outputs};
//   adapter.call_batched(key, me, write, read, variant);   // write: write_batch(dir, family, members)
#pragma once

#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/contract/families.h"
#include "backends/external/adapter.h"

namespace kvfuzz {

// One case's part of a batch.
struct BatchMember : BatchSlot {
  const Plan* plan = nullptr;
  const std::vector<RunInput>* inputs = nullptr;  // its value sets (main, probes)
  std::vector<RunOutput>* outputs = nullptr;      // one per value set
};

// The key cases must share to run as one call (`variant`: the model's side of the kernel variant);
// "" when this one cannot batch (its family has no merge, its plan's structure does not allow it,
// or its value sets' pools together, dense, would pass kSparsePoolElements).
std::string batch_key(const Family& family, const Plan& plan, const std::vector<RunInput>& inputs,
                      const std::string& variant);

// What the case adds to a batch's pools: its value sets' largest pools (dense K elements), summed
// (BatchSlot::pool_elements).
int64_t pool_elements(const std::vector<RunInput>& inputs);

// Writes the members (BatchMember) as one execute request: the merged plan of every member's
// every value set, in order, as one value set.
void write_batch(const std::string& dir, const Family& family, const std::vector<BatchSlot*>& members);

// Splits the batch's outputs back into each member's outputs.
void read_batch(const std::string& dir, const std::vector<BatchSlot*>& members);

}  // namespace kvfuzz
