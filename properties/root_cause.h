// Root causes: the findings of one bug in one group, whatever property, mode or layer kind saw them.
//
// Where it sits: after fingerprint.h, before everything that counts findings (the campaign writes
// each index line's `group`, triage.py and `kvfuzz report` show groups first, keys inside). One
// planted bug gives dozens of fingerprint keys (a wrong cache_seqlens is seen as a metadata
// message, a wrong page table row, a wrong read set in each mode and layer kind, and the oracle's
// `reads:X` on each query); they are one bug because they follow from each other on the same
// case. The rule, computed from one case's findings alone, so that every case's lines, and any
// merge of campaigns, agree:
//
//   1. Each finding belongs to a stage of the metadata's flow: metadata (lengths, offsets, counts:
//      computed first), table (a page table's or index list's entries, a buffer's bounds), reads
//      (the keys a query read), values (the oracle's numbers), changed (a metamorphic variant);
//      crash, hang, contract and harness errors stand alone.
//   2. On one case, one backend's findings of stage s follow from those of the earliest stage that
//      failed: the case's root is that stage's finding whose layer's metadata is computed first
//      (no layer or a full layer, then sliding-window, then chunked: engines derive the window
//      and chunk metadata from the full one; a backend whose chunked layers split the full call's
//      lengths names those under no layer even where no layer reads them, backends/fa/fa_check.cc),
//      ties by root key.
//   3. The group is the root's root key: backend, stage and what failed with the batch mode, the
//      layer kind, the variant, the metadata's dotted path and numbers taken out, a chunked
//      layer's own metadata marked ("fa: metadata: chunked: cache_seqlens[N] ... (too small)",
//      "fa: table: local_block_table"); a read set by its kind alone ("triton: reads: missing":
//      one dropped key is missing-newest, -interior or -all by where the query sits). The same
//      root on any case, in any mode, is the same group.
//
//   std::vector<RootCause> r = root_causes(fingerprints_of_one_case);
//   r[i].group;  // "fa: table: swa_page_table"
//   r[i].why;    // "a reads finding that follows from table stride-divide/fa/decode/sliding_window:
//                //  swa_page_table:wrong-slot on the same case"
#pragma once

#include <string>
#include <vector>

#include "properties/fingerprint.h"

namespace kvfuzz {

enum class Stage { metadata, table, reads, values, changed, failure };

const char* to_string(Stage s);

// The stage of a fingerprint (rule 1).
Stage stage_of(const Fingerprint& fp);

// The group a fingerprint names when it is its case's root (rule 3).
//   root_key(fp of "oracle/fa/extend/chunked: reads:missing-newest")  // "fa: reads: missing"
std::string root_key(const Fingerprint& fp);

struct RootCause {
  std::string group;  // the root key of the finding's case root
  std::string why;    // one line: why this finding is in that group
};

// One per fingerprint, in the same order: the fingerprints of one case (any backends).
std::vector<RootCause> root_causes(const std::vector<Fingerprint>& one_case);

}  // namespace kvfuzz
