#pragma once
// Collator: a MongoDB collation ({locale, strength, caseLevel, ...}) backed by
// an ICU collator. It is the one string-comparison abstraction of the store:
// the matcher, sorts, aggregation expressions and accumulators compare strings
// through it, and collated indexes store its comparison keys (ICU sort keys)
// instead of the strings' bytes (see key_string.h).
//
// A null `const Collator*` (or null shared_ptr) means the simple binary
// collation everywhere, so a query without collation pays one pointer test.
// {locale: "simple"} parses to null as well.
//
// Parsing validates like mongod's CollatorFactoryICU (same codes, messages
// and checks, in the same order) and fills in every field ICU defaults for
// the locale, so spec() is what mongod reports in listCollections,
// listIndexes and explain. The reported version is mongod's ICU version,
// "57.1"; a spec naming another version fails with
// IncompatibleCollationVersion (254).
//
// Immutable after parse; compare() and comparisonKey() are thread-safe (ICU
// collators may be used concurrently through their const methods).
#include <bson/bson.h>

#include <memory>
#include <string>
#include <string_view>

#include "bson/compare.h"
#include "bson/doc.h"
#include "common/status.h"

namespace halo::query {

/// The normalized collation specification (every field filled in).
struct CollationSpec {
    std::string locale;
    bool caseLevel = false;
    std::string caseFirst = "off";  // "upper" | "lower" | "off"
    int strength = 3;               // 1..5
    bool numericOrdering = false;
    std::string alternate = "non-ignorable";  // | "shifted"
    std::string maxVariable = "punct";        // | "space"
    bool normalization = false;
    bool backwards = false;
    std::string version;

    bool operator==(const CollationSpec&) const = default;
};

class Collator final : public bson::StringComparator {
  public:
    ~Collator() override;

    /// The ICU version mongod reports in collation specs.
    static constexpr std::string_view kVersion = "57.1";

    /// Parses a collation document. Returns null (and OK) for {locale: "simple"}.
    /// Errors: NoSuchKey(4) without locale, TypeMismatch(14) for ill-typed
    /// fields, BadValue(2) for a locale ICU does not know ("Field 'locale' is
    /// invalid in: ...") and for invalid combinations, FailedToParse(9) for bad
    /// enum values and unknown fields, IncompatibleCollationVersion(254).
    static StatusWith<std::shared_ptr<const Collator>> parse(const bson_t* spec);

    int compare(std::string_view a, std::string_view b) const override;
    std::string comparisonKey(std::string_view s) const override;

    const CollationSpec& spec() const { return spec_; }
    /// The normalized spec as mongod shows it: {locale, caseLevel, caseFirst,
    /// strength, numericOrdering, alternate, maxVariable, normalization,
    /// backwards, version}.
    bson::Doc toDoc() const;
    void appendTo(bson_t* out, std::string_view field) const;

  private:
    struct Impl;
    explicit Collator(std::unique_ptr<Impl> impl, CollationSpec spec);
    std::unique_ptr<Impl> impl_;
    CollationSpec spec_;
};

using CollatorPtr = std::shared_ptr<const Collator>;

/// True when both collations compare identically: both simple (null), or
/// equal specs.
bool sameCollation(const Collator* a, const Collator* b);

/// {locale: "simple"} exactly (the explicit simple collation, which overrides
/// a collection's default).
bool isSimpleCollationSpec(const bson_t* spec);

}  // namespace halo::query
