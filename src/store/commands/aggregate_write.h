#pragma once
// The aggregation stages that write: $out (replace a collection with the
// pipeline's output, atomically) and $merge (fold the output into a collection
// document by document). Either must be the pipeline's last stage; the
// aggregate command takes it off, runs the rest, and hands the documents here.
//
//  - $out writes into a temporary collection of the target database created
//    with the target's options and indexes, then renames it over the target
//    (dropTarget): readers see the old contents or the new, never a mix; a
//    failure (a duplicate _id, a validator) drops the temporary collection
//    and leaves the target as it was.
//  - $merge runs one standard update (or insert) command per document, so each
//    write goes through validation, unique indexes and the oplog as any
//    client's would; it is not atomic (mongod's is not either): documents
//    written before a failure stay.
// Both refuse to run in a multi-document transaction (263), as mongod does.
#include <optional>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/commands/command.h"
#include "store/exec/doc_stream.h"

namespace halo::store {

struct WriteStageSpec {
    enum class Kind { Out, Merge } kind = Kind::Out;
    std::string db, coll;  // the target
    // $merge only.
    std::vector<std::string> on{"_id"};
    enum class WhenMatched { Replace, KeepExisting, Merge, Fail, Pipeline };
    WhenMatched whenMatched = WhenMatched::Merge;
    bson::Doc whenMatchedPipeline;  // an array, for WhenMatched::Pipeline
    enum class WhenNotMatched { Insert, Discard, Fail };
    WhenNotMatched whenNotMatched = WhenNotMatched::Insert;
    std::optional<bson::Doc> let;  // for WhenMatched::Pipeline

    const char* stageName() const { return kind == Kind::Out ? "$out" : "$merge"; }
    std::string ns() const { return db + "." + coll; }
};

/// When the pipeline's last stage is $out or $merge: removes it from `pipeline`
/// and returns it parsed (mongod's codes for a bad specification). Either stage
/// anywhere else fails with 40601.
std::optional<WriteStageSpec> takeWriteStage(bson::Doc& pipeline, const std::string& db);

/// Checks what can be checked before the pipeline runs: not in a transaction,
/// not a capped $out target, a unique index for $merge's `on` fields.
void checkWriteStage(OperationContext& op, const WriteStageSpec& w);

/// Runs the stream to its end and writes its documents to the target.
/// `readBatch(out)` fills `out` with the next documents (under the locks the
/// caller needs for reading) and returns false once the stream is exhausted;
/// no lock is held here between batches. `collation`: the aggregate's, used by
/// $merge to match documents (null: none given).
void runWriteStage(OperationContext& op, const WriteStageSpec& w,
                   const std::function<bool(std::vector<bson::Doc>& out)>& readBatch,
                   const bson_t* collation);

}  // namespace halo::store
