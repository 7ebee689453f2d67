#pragma once
// The validate command's work: checks one collection's record store and
// indexes against each other, in one storage snapshot.
//
//  - every record is well-formed BSON (else nInvalidDocuments, errors);
//  - every index holds exactly the keys its documents generate, and every
//    index entry points at a record that generates it: the entries the
//    documents imply and the entries the index holds are counted into hash
//    buckets (mongod's approach, memory bounded by the bucket count); only
//    buckets that disagree are examined again, entry by entry, to name the
//    missing and extra entries;
//  - documents that fail the collection's validator are counted
//    (nNonCompliantDocuments), a warning as mongod gives.
//
// Reads only; runs inside the caller's transaction on `s`; checks for
// interruption (killOp) as it scans. Throws DBException on storage errors.
#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/storage/catalog.h"

namespace halo::store {

struct ValidateResults {
    int64_t nrecords = 0;
    int64_t nInvalidDocuments = 0;
    int64_t nNonCompliantDocuments = 0;
    struct IndexResult {
        std::string name;
        int64_t keys = 0;  // entries in the index
        bool valid = true;
    };
    std::vector<IndexResult> indexes;
    std::vector<bson::Doc> missingIndexEntries;  // {indexName, recordId, idKey}
    std::vector<bson::Doc> extraIndexEntries;    // {indexName, recordId}
    std::vector<std::string> errors;
    std::vector<std::string> warnings;
    bool valid() const { return errors.empty(); }
};

/// Validates `c` (see the file comment).
ValidateResults validateCollection(Session& s, const CollectionEntry& c);

}  // namespace halo::store
