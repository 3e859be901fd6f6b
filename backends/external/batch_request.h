// Independent cases of one shape as one executor request: one kernel call for many cases.
//
// Where it sits: between the pair backend (pair_backend.cc), whose run_many hands each case to
// Adapter::call_batched, and the exchange (exchange.h), which writes the request. Cases batch
// when their model (dtype, heads, dims, page size, layer kinds, sm_scale, soft cap) and their
// plan's structure (Family::batch_shape: the calls and their flags, whatever the batch mode that
// made them; a kernel sees rows, not modes) are equal: their rows are concatenated, their tokens
// and pool slots offset into one pool (Family::merge), and the outputs split back. Each case then
// reads, in the batch's pool, exactly the keys it read alone. Their value sets (the case's own,
// the read-set probes') may differ in number: the batch runs as many as its case with the most,
// a case with fewer repeating its last one, whose answer is not read.
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
// or a pool goes out sparse).
std::string batch_key(const Family& family, const Plan& plan, const std::vector<RunInput>& inputs,
                      const std::string& variant);

// The largest of the case's pools, dense K elements (BatchSlot::pool_elements).
int64_t largest_pool(const std::vector<RunInput>& inputs);

// Writes the members (BatchMember) as one execute request: the merged plan, set j holding every
// member's inputs[j], as many sets as the member with the most (value_set_names).
void write_batch(const std::string& dir, const Family& family, const std::vector<BatchSlot*>& members);

// Splits the batch's outputs back into each member's outputs (of the sets it has).
void read_batch(const std::string& dir, const std::vector<BatchSlot*>& members);

}  // namespace kvfuzz
