#include "store/query/json_schema.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bson/compare.h"
#include "store/query/match_expression.h"
#include "store/query/regex.h"
#include "store/query/value.h"

namespace halo::query {

struct SchemaNode;
using NodePtr = std::unique_ptr<SchemaNode>;

namespace {

[[noreturn]] void fail(ErrorCode c, std::string msg) {
    uasserted(c, std::move(msg));
}

constexpr std::string_view kSupported[] = {"additionalItems",
                                           "additionalProperties",
                                           "allOf",
                                           "anyOf",
                                           "bsonType",
                                           "dependencies",
                                           "description",
                                           "enum",
                                           "exclusiveMaximum",
                                           "exclusiveMinimum",
                                           "items",
                                           "maxItems",
                                           "maxLength",
                                           "maxProperties",
                                           "maximum",
                                           "minItems",
                                           "minLength",
                                           "minProperties",
                                           "minimum",
                                           "multipleOf",
                                           "not",
                                           "oneOf",
                                           "pattern",
                                           "patternProperties",
                                           "properties",
                                           "required",
                                           "title",
                                           "type",
                                           "uniqueItems"};
// mongod refuses these by name; encrypt/encryptMetadata (client-side field
// level encryption) are refused here too, as this store has no encryption.
constexpr std::string_view kUnsupported[] = {"$ref",   "$schema", "default", "definitions",
                                             "format", "id",      "encrypt", "encryptMetadata"};

template <size_t N>
bool listed(std::string_view k, const std::string_view (&list)[N]) {
    return std::find(std::begin(list), std::end(list), k) != std::end(list);
}

/// Values equal as mongod's enum and uniqueItems compare them: field order in
/// embedded documents does not matter, numbers compare by value.
bool sameValue(const bson_value_t& a, const bson_value_t& b) {
    if (a.value_type == BSON_TYPE_DOCUMENT && b.value_type == BSON_TYPE_DOCUMENT) {
        bson_t da, db;
        if (!viewOf(a, &da) || !viewOf(b, &db) || bson_count_keys(&da) != bson_count_keys(&db))
            return false;
        bson_iter_t ia;
        bson_iter_init(&ia, &da);
        while (bson_iter_next(&ia)) {
            bson_iter_t ib;
            if (!bson_iter_init_find_w_len(&ib, &db, bson_iter_key(&ia),
                                           static_cast<int>(bson_iter_key_len(&ia))) ||
                !sameValue(*bson_iter_value(&ia), *bson_iter_value(&ib)))
                return false;
        }
        return true;
    }
    if (a.value_type == BSON_TYPE_ARRAY && b.value_type == BSON_TYPE_ARRAY) {
        bson_iter_t ia, ib;
        if (!bson_iter_init_from_data(&ia, a.value.v_doc.data, a.value.v_doc.data_len) ||
            !bson_iter_init_from_data(&ib, b.value.v_doc.data, b.value.v_doc.data_len))
            return false;
        while (true) {
            bool na = bson_iter_next(&ia), nb = bson_iter_next(&ib);
            if (na != nb) return false;
            if (!na) return true;
            if (!sameValue(*bson_iter_value(&ia), *bson_iter_value(&ib))) return false;
        }
    }
    return bson::compareValues(a, b) == 0;
}

std::vector<Value> elementsOf(const bson_value_t& v) {
    std::vector<Value> out;
    bson_iter_t it;
    if (bson_iter_init_from_data(&it, v.value.v_doc.data, v.value.v_doc.data_len))
        while (bson_iter_next(&it)) out.emplace_back(*bson_iter_value(&it));
    return out;
}

int64_t countFields(const bson_value_t& v) {
    bson_t d;
    return viewOf(v, &d) ? bson_count_keys(&d) : 0;
}

/// UTF-8 code points, as mongod counts string length.
int64_t codePoints(std::string_view s) {
    int64_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;
    return n;
}

std::string elementText(std::string_view keyword, const bson_value_t& v) {
    return fmt::format("{}: {}", keyword, bson::valueToString(v));
}

/// A non-negative whole number (minLength, maxItems, ...), with mongod's errors.
int64_t nonNegativeInteger(std::string_view keyword, const bson_value_t& v) {
    if (!bson::isNumber(v.value_type))
        fail(ErrorCode::FailedToParse, "Expected a number in: " + elementText(keyword, v));
    int64_t n = 0;
    if (!bson::toInt64Exact(v, &n))
        fail(ErrorCode::FailedToParse, "Expected an integer: " + elementText(keyword, v));
    if (n < 0)
        fail(ErrorCode::FailedToParse, "Expected a positive number in: " + elementText(keyword, v));
    return n;
}

std::string keywordMustBe(std::string_view keyword, std::string_view what) {
    return fmt::format("$jsonSchema keyword '{}' must be {}", keyword, what);
}

}  // namespace

enum class Extra { kAbsent, kAllowed, kForbidden, kSchema };

struct NamedSchema {
    std::string name;
    NodePtr schema;
};

struct PatternSchema {
    std::string pattern;
    Regex regex;
    NodePtr schema;
};

struct Dependency {
    std::string property;
    std::vector<std::string> requiredProperties;  // property dependency
    NodePtr schema;                               // schema dependency
};

/// One parsed (sub)schema. `source` keeps the schema document for specifiedAs.
struct SchemaNode {
    bson::Doc source;
    std::optional<std::string> title, description;

    std::string typeKeyword;  // "type" or "bsonType"; empty: no type restriction
    std::unique_ptr<TypePredicate> type;
    bool typeAllowsObject = true;

    std::optional<Value> minimum, maximum, multipleOf;
    bool exclusiveMinimum = false, exclusiveMaximum = false;
    std::optional<int64_t> minLength, maxLength;
    std::optional<Regex> pattern;

    std::optional<int64_t> minItems, maxItems;
    bool uniqueItems = false;
    NodePtr items;                   // items: {schema}
    std::vector<NodePtr> itemsList;  // items: [{schema}, ...]
    bool itemsIsList = false;
    Extra additionalItems = Extra::kAbsent;
    NodePtr additionalItemsSchema;

    std::vector<NamedSchema> properties;
    bool hasProperties = false;
    std::vector<std::string> required;  // sorted, as mongod reports them
    Extra additionalProperties = Extra::kAbsent;
    NodePtr additionalPropertiesSchema;
    std::vector<PatternSchema> patternProperties;
    std::optional<int64_t> minProperties, maxProperties;
    std::vector<Dependency> dependencies;

    std::vector<NodePtr> allOf, anyOf, oneOf;
    NodePtr notSchema;
    std::optional<std::vector<Value>> enumValues;
};

namespace {

NodePtr parseNode(const bson_t* schema, int depth);

const bson_value_t* keywordValue(const std::map<std::string_view, bson_iter_t>& kw,
                                 std::string_view name) {
    auto it = kw.find(name);
    return it == kw.end() ? nullptr : bson_iter_value(const_cast<bson_iter_t*>(&it->second));
}

NodePtr parseSubschema(const bson_value_t& v, int depth, const std::string& whenNotObject) {
    bson_t sub;
    if (v.value_type != BSON_TYPE_DOCUMENT || !viewOf(v, &sub))
        fail(ErrorCode::TypeMismatch, whenNotObject);
    return parseNode(&sub, depth + 1);
}

/// additionalItems / additionalProperties: true, false, or a schema (into `schema`).
Extra parseExtra(const bson_value_t& v, int depth, NodePtr* schema, const std::string& wrongType) {
    if (v.value_type == BSON_TYPE_BOOL) return v.value.v_bool ? Extra::kAllowed : Extra::kForbidden;
    if (v.value_type != BSON_TYPE_DOCUMENT) fail(ErrorCode::TypeMismatch, wrongType);
    *schema = parseSubschema(v, depth, "");
    return Extra::kSchema;
}

void parseType(SchemaNode& n, std::string_view keyword, const bson_value_t& v) {
    std::vector<std::string> aliases;
    if (v.value_type == BSON_TYPE_UTF8) {
        aliases.emplace_back(v.value.v_utf8.str, v.value.v_utf8.len);
    } else if (v.value_type == BSON_TYPE_ARRAY) {
        for (const auto& e : elementsOf(v)) {
            if (e.type() != BSON_TYPE_UTF8)
                fail(ErrorCode::TypeMismatch,
                     fmt::format("$jsonSchema keyword '{}' array elements must be strings",
                                 keyword));
            std::string a(e.str());
            if (std::find(aliases.begin(), aliases.end(), a) != aliases.end())
                fail(ErrorCode::FailedToParse,
                     fmt::format("$jsonSchema keyword '{}' has duplicate value: {}", keyword, a));
            aliases.push_back(std::move(a));
        }
    } else {
        fail(ErrorCode::TypeMismatch,
             keywordMustBe(keyword, "either a string or an array of strings"));
    }
    if (aliases.empty())
        fail(ErrorCode::FailedToParse,
             fmt::format("$jsonSchema keyword '{}' must name at least one type", keyword));
    std::vector<int> codes;
    bool number = false;
    for (const auto& a : aliases) {
        if (a == "number") {
            number = true;
            continue;
        }
        int code = 0;
        if (keyword == "type") {
            if (a == "integer")
                fail(ErrorCode::FailedToParse,
                     "$jsonSchema type 'integer' is not currently supported.");
            // JSON Schema's own names.
            code = a == "array"     ? 4
                   : a == "boolean" ? 8
                   : a == "null"    ? 10
                   : a == "object"  ? 3
                   : a == "string"  ? 2
                                    : 0;
        } else {
            code = bsonTypeCodeForAlias(a);
        }
        if (code == 0) fail(ErrorCode::BadValue, "Unknown type name alias: " + a);
        codes.push_back(code);
    }
    n.typeKeyword = std::string(keyword);
    n.typeAllowsObject = std::find(codes.begin(), codes.end(), 3) != codes.end();
    n.type = std::make_unique<TypePredicate>(std::move(codes), number);
}

void parseScalarKeywords(SchemaNode& n, const std::map<std::string_view, bson_iter_t>& kw) {
    if (const auto* v = keywordValue(kw, "pattern")) {
        if (v->value_type != BSON_TYPE_UTF8)
            fail(ErrorCode::TypeMismatch, keywordMustBe("pattern", "a string"));
        n.pattern = uassertStatusOK(Regex::compile({v->value.v_utf8.str, v->value.v_utf8.len}, ""));
    }
    if (const auto* v = keywordValue(kw, "maxLength"))
        n.maxLength = nonNegativeInteger("maxLength", *v);
    if (const auto* v = keywordValue(kw, "minLength"))
        n.minLength = nonNegativeInteger("minLength", *v);
    if (const auto* v = keywordValue(kw, "multipleOf")) {
        if (!bson::isNumber(v->value_type))
            fail(ErrorCode::TypeMismatch, keywordMustBe("multipleOf", "a number"));
        double d = bson::toDouble(*v);
        if (!(d > 0))
            fail(ErrorCode::FailedToParse, keywordMustBe("multipleOf", "have a positive value"));
        n.multipleOf = Value(*v);
    }
    auto bound = [&](const char* keyword, const char* exclusiveKeyword, std::optional<Value>* out,
                     bool* exclusive) {
        const auto* v = keywordValue(kw, keyword);
        const auto* ex = keywordValue(kw, exclusiveKeyword);
        if (!v) {
            if (ex)
                fail(ErrorCode::FailedToParse,
                     fmt::format("$jsonSchema keyword '{}' must be a present if {} is present",
                                 keyword, exclusiveKeyword));
            return;
        }
        if (ex) {
            if (ex->value_type != BSON_TYPE_BOOL)
                fail(ErrorCode::TypeMismatch, keywordMustBe(exclusiveKeyword, "a boolean"));
            *exclusive = ex->value.v_bool;
        }
        if (!bson::isNumber(v->value_type))
            fail(ErrorCode::TypeMismatch, keywordMustBe(keyword, "a number"));
        *out = Value(*v);
    };
    bound("maximum", "exclusiveMaximum", &n.maximum, &n.exclusiveMaximum);
    bound("minimum", "exclusiveMinimum", &n.minimum, &n.exclusiveMinimum);
}

void parseArrayKeywords(SchemaNode& n, const std::map<std::string_view, bson_iter_t>& kw,
                        int depth) {
    if (const auto* v = keywordValue(kw, "minItems"))
        n.minItems = nonNegativeInteger("minItems", *v);
    if (const auto* v = keywordValue(kw, "maxItems"))
        n.maxItems = nonNegativeInteger("maxItems", *v);
    if (const auto* v = keywordValue(kw, "uniqueItems")) {
        if (v->value_type != BSON_TYPE_BOOL)
            fail(ErrorCode::TypeMismatch, keywordMustBe("uniqueItems", "a boolean"));
        n.uniqueItems = v->value.v_bool;
    }
    if (const auto* v = keywordValue(kw, "items")) {
        if (v->value_type == BSON_TYPE_ARRAY) {
            n.itemsIsList = true;
            for (const auto& e : elementsOf(*v))
                n.itemsList.push_back(parseSubschema(
                    e.get(), depth,
                    fmt::format(
                        "$jsonSchema keyword 'items' requiredProperties that each element of the "
                        "array is an object, but found a {}",
                        bson::typeName(e.type()))));
        } else if (v->value_type == BSON_TYPE_DOCUMENT) {
            n.items = parseSubschema(*v, depth, "");
        } else {
            fail(ErrorCode::TypeMismatch,
                 fmt::format("$jsonSchema keyword 'items' must be an array or an object, not {}",
                             bson::typeName(v->value_type)));
        }
    }
    if (const auto* v = keywordValue(kw, "additionalItems"))
        n.additionalItems = parseExtra(
            *v, depth, &n.additionalItemsSchema,
            fmt::format("$jsonSchema keyword 'additionalItems' must be either an object or a "
                        "boolean, but got a {}",
                        bson::typeName(v->value_type)));
}

std::vector<std::string> stringList(const bson_value_t& v, std::string_view keyword) {
    if (v.value_type != BSON_TYPE_ARRAY)
        fail(ErrorCode::TypeMismatch,
             fmt::format("$jsonSchema keyword '{}' must be an array, but found an element of "
                         "type {}",
                         keyword, bson::typeName(v.value_type)));
    std::vector<std::string> out;
    for (const auto& e : elementsOf(v)) {
        if (e.type() != BSON_TYPE_UTF8)
            fail(ErrorCode::TypeMismatch,
                 fmt::format("$jsonSchema keyword '{}' must be an array of strings, but found an "
                             "element of type: {}",
                             keyword, bson::typeName(e.type())));
        out.emplace_back(e.str());
    }
    return out;
}

void parseObjectKeywords(SchemaNode& n, const std::map<std::string_view, bson_iter_t>& kw,
                         int depth) {
    if (const auto* v = keywordValue(kw, "required")) {
        auto names = stringList(*v, "required");
        if (names.empty())
            fail(ErrorCode::FailedToParse,
                 "$jsonSchema keyword 'required' cannot be an empty array");
        std::sort(names.begin(), names.end());
        if (std::adjacent_find(names.begin(), names.end()) != names.end())
            fail(ErrorCode::FailedToParse,
                 "$jsonSchema keyword 'required' array cannot contain duplicate values");
        n.required = std::move(names);
    }
    if (const auto* v = keywordValue(kw, "properties")) {
        bson_t props;
        if (v->value_type != BSON_TYPE_DOCUMENT || !viewOf(*v, &props))
            fail(ErrorCode::TypeMismatch, keywordMustBe("properties", "an object"));
        n.hasProperties = true;
        bson_iter_t it;
        bson_iter_init(&it, &props);
        while (bson_iter_next(&it)) {
            std::string name(bson_iter_key(&it), bson_iter_key_len(&it));
            n.properties.push_back(
                {name, parseSubschema(*bson_iter_value(&it), depth,
                                      fmt::format("Nested schema for $jsonSchema property '{}' "
                                                  "must be an object",
                                                  name))});
        }
    }
    if (const auto* v = keywordValue(kw, "patternProperties")) {
        bson_t pats;
        if (v->value_type != BSON_TYPE_DOCUMENT || !viewOf(*v, &pats))
            fail(ErrorCode::TypeMismatch, keywordMustBe("patternProperties", "an object"));
        bson_iter_t it;
        bson_iter_init(&it, &pats);
        while (bson_iter_next(&it)) {
            std::string pattern(bson_iter_key(&it), bson_iter_key_len(&it));
            auto schema = parseSubschema(
                *bson_iter_value(&it), depth,
                fmt::format("$jsonSchema keyword 'patternProperties' has property '{}' which is "
                            "not an object",
                            pattern));
            auto re = uassertStatusOK(Regex::compile(pattern, ""));
            n.patternProperties.push_back({pattern, std::move(re), std::move(schema)});
        }
    }
    if (const auto* v = keywordValue(kw, "additionalProperties"))
        n.additionalProperties =
            parseExtra(*v, depth, &n.additionalPropertiesSchema,
                       keywordMustBe("additionalProperties", "an object or a boolean"));
    if (const auto* v = keywordValue(kw, "minProperties"))
        n.minProperties = nonNegativeInteger("minProperties", *v);
    if (const auto* v = keywordValue(kw, "maxProperties"))
        n.maxProperties = nonNegativeInteger("maxProperties", *v);
    if (const auto* v = keywordValue(kw, "dependencies")) {
        bson_t deps;
        if (v->value_type != BSON_TYPE_DOCUMENT || !viewOf(*v, &deps))
            fail(ErrorCode::TypeMismatch, keywordMustBe("dependencies", "an object"));
        bson_iter_t it;
        bson_iter_init(&it, &deps);
        while (bson_iter_next(&it)) {
            Dependency d;
            d.property.assign(bson_iter_key(&it), bson_iter_key_len(&it));
            const bson_value_t& dv = *bson_iter_value(&it);
            if (dv.value_type == BSON_TYPE_DOCUMENT) {
                d.schema = parseSubschema(dv, depth, "");
            } else if (dv.value_type == BSON_TYPE_ARRAY) {
                for (const auto& e : elementsOf(dv)) {
                    if (e.type() != BSON_TYPE_UTF8)
                        fail(ErrorCode::TypeMismatch,
                             fmt::format("array '{}' in $jsonSchema keyword 'dependencies' can "
                                         "only contain strings, but found element of type: {}",
                                         d.property, bson::typeName(e.type())));
                    std::string name(e.str());
                    if (std::find(d.requiredProperties.begin(), d.requiredProperties.end(), name) !=
                        d.requiredProperties.end())
                        fail(ErrorCode::FailedToParse,
                             fmt::format("array '{}' in $jsonSchema keyword 'dependencies' "
                                         "contains duplicate element: {}",
                                         d.property, name));
                    d.requiredProperties.push_back(std::move(name));
                }
                if (d.requiredProperties.empty())
                    fail(ErrorCode::FailedToParse,
                         fmt::format("property '{}' in $jsonSchema keyword 'dependencies' "
                                     "cannot be an empty array",
                                     d.property));
            } else {
                fail(ErrorCode::TypeMismatch,
                     fmt::format("property '{}' in $jsonSchema keyword 'dependencies' must be "
                                 "either an object or an array",
                                 d.property));
            }
            n.dependencies.push_back(std::move(d));
        }
    }
}

void parseLogicalKeywords(SchemaNode& n, const std::map<std::string_view, bson_iter_t>& kw,
                          int depth) {
    auto list = [&](const char* keyword, std::vector<NodePtr>* out) {
        const auto* v = keywordValue(kw, keyword);
        if (!v) return;
        if (v->value_type != BSON_TYPE_ARRAY)
            fail(ErrorCode::TypeMismatch, keywordMustBe(keyword, "an array"));
        auto elems = elementsOf(*v);
        if (elems.empty()) fail(ErrorCode::BadValue, keywordMustBe(keyword, "a non-empty array"));
        for (const auto& e : elems)
            out->push_back(parseSubschema(
                e.get(), depth,
                fmt::format("$jsonSchema keyword '{}' must be an array of objects, but found an "
                            "element of type {}",
                            keyword, bson::typeName(e.type()))));
    };
    list("allOf", &n.allOf);
    list("anyOf", &n.anyOf);
    list("oneOf", &n.oneOf);
    if (const auto* v = keywordValue(kw, "not"))
        n.notSchema = parseSubschema(
            *v, depth,
            fmt::format("$jsonSchema keyword 'not' must be an object, but found an element of "
                        "type {}",
                        bson::typeName(v->value_type)));
    if (const auto* v = keywordValue(kw, "enum")) {
        if (v->value_type != BSON_TYPE_ARRAY)
            fail(ErrorCode::TypeMismatch,
                 fmt::format("$jsonSchema keyword 'enum' must be an array, but found an element "
                             "of type {}",
                             bson::typeName(v->value_type)));
        auto values = elementsOf(*v);
        if (values.empty())
            fail(ErrorCode::FailedToParse, "$jsonSchema keyword 'enum' cannot be an empty array");
        for (size_t i = 0; i < values.size(); ++i)
            for (size_t j = 0; j < i; ++j)
                if (sameValue(values[i].get(), values[j].get()))
                    fail(ErrorCode::FailedToParse,
                         "$jsonSchema keyword 'enum' array cannot contain duplicate values.");
        n.enumValues = std::move(values);
    }
}

NodePtr parseNode(const bson_t* schema, int depth) {
    if (depth > 150) fail(ErrorCode::BadValue, "$jsonSchema exceeded the maximum nesting depth");
    auto n = std::make_unique<SchemaNode>();
    n->source = bson::Doc::copyOf(schema);
    std::map<std::string_view, bson_iter_t> kw;
    bson_iter_t it;
    if (!bson_iter_init(&it, n->source.get())) fail(ErrorCode::InvalidBSON, "invalid $jsonSchema");
    while (bson_iter_next(&it)) {
        std::string_view k(bson_iter_key(&it), bson_iter_key_len(&it));
        if (!listed(k, kSupported)) {
            if (listed(k, kUnsupported))
                fail(ErrorCode::FailedToParse,
                     fmt::format("$jsonSchema keyword '{}' is not currently supported", k));
            fail(ErrorCode::FailedToParse, fmt::format("Unknown $jsonSchema keyword: {}", k));
        }
        if (kw.count(k))
            fail(ErrorCode::FailedToParse, fmt::format("Duplicate $jsonSchema keyword: {}", k));
        kw[k] = it;
    }
    for (const char* meta : {"description", "title"}) {
        const auto* v = keywordValue(kw, meta);
        if (!v) continue;
        if (v->value_type != BSON_TYPE_UTF8)
            fail(ErrorCode::TypeMismatch, keywordMustBe(meta, "of type string"));
        (std::string_view(meta) == "title" ? n->title : n->description)
            .emplace(v->value.v_utf8.str, v->value.v_utf8.len);
    }
    const auto* type = keywordValue(kw, "type");
    const auto* bsonType = keywordValue(kw, "bsonType");
    if (type && bsonType)
        fail(ErrorCode::FailedToParse,
             "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'");
    if (type) parseType(*n, "type", *type);
    if (bsonType) parseType(*n, "bsonType", *bsonType);
    parseScalarKeywords(*n, kw);
    parseArrayKeywords(*n, kw, depth);
    parseObjectKeywords(*n, kw, depth);
    parseLogicalKeywords(*n, kw, depth);
    return n;
}

// ------------------------------------------------------------------ evaluation

/// The rules one schema node reports as failed.
using Rules = std::vector<bson::Doc>;

/// Collects the failed rules of one schema applied to one value. Without a
/// destination (a yes/no match) the first failure ends the check: add()
/// returns false and the caller returns at once. Rules are built only for
/// failures, so a passing document costs no allocation here.
class Failures {
  public:
    explicit Failures(Rules* out) : out_(out) {}
    bool ok() const { return ok_; }
    bool collecting() const { return out_ != nullptr; }
    /// Where a sub-check collects its rules (null: yes/no only).
    Rules* sub(Rules* rules) const { return out_ ? rules : nullptr; }
    bool add(bson::Doc rule) {
        ok_ = false;
        if (!out_) return false;
        out_->push_back(std::move(rule));
        return true;
    }

  private:
    Rules* out_;
    bool ok_ = true;
};

bool check(const SchemaNode& n, const bson_value_t& v, Rules* out);

/// {operatorName: keyword, specifiedAs: {keyword: <as written>}} for a keyword of `n`.
bson::Doc rule(const SchemaNode& n, std::string_view keyword, bool withSpec = true) {
    bson::Doc d;
    BSON_APPEND_UTF8(d.mut(), "operatorName", std::string(keyword).c_str());
    bson_iter_t it;
    if (withSpec && bson::find(n.source.get(), keyword, &it)) {
        bson_t spec;
        BSON_APPEND_DOCUMENT_BEGIN(d.mut(), "specifiedAs", &spec);
        bson::appendIter(&spec, keyword, it);
        bson_append_document_end(d.mut(), &spec);
    }
    return d;
}

/// A keyword's rule with the reason and the value it considered.
bson::Doc valueRule(const SchemaNode& n, std::string_view keyword, const char* reason,
                    const bson_value_t& v) {
    bson::Doc r = rule(n, keyword);
    BSON_APPEND_UTF8(r.mut(), "reason", reason);
    bson::appendValue(r.mut(), "consideredValue", v);
    return r;
}

/// title/description of a subschema, reported next to its errors.
void appendAnnotations(bson_t* d, const SchemaNode& n) {
    if (n.title) BSON_APPEND_UTF8(d, "title", n.title->c_str());
    if (n.description) BSON_APPEND_UTF8(d, "description", n.description->c_str());
}

void appendRules(bson_t* d, const char* key, const Rules& rules) {
    bson::appendDocArray(d, key, rules);
}

/// {index | itemIndex: i, [title, description], details: [rules]}.
bson::Doc indexed(const char* indexKey, int64_t i, const Rules& rules,
                  const SchemaNode* annotations = nullptr) {
    bson::Doc d;
    BSON_APPEND_INT32(d.mut(), indexKey, static_cast<int32_t>(i));
    if (annotations) appendAnnotations(d.mut(), *annotations);
    appendRules(d.mut(), "details", rules);
    return d;
}

/// items / additionalItems with one subschema: the first element that fails it.
bson::Doc itemRule(const SchemaNode& n, const char* keyword, const SchemaNode& schema,
                   const char* reason, size_t index, const Rules& sub) {
    bson::Doc r = rule(n, keyword, false);
    appendAnnotations(r.mut(), schema);
    BSON_APPEND_UTF8(r.mut(), "reason", reason);
    BSON_APPEND_INT32(r.mut(), "itemIndex", static_cast<int32_t>(index));
    appendRules(r.mut(), "details", sub);
    return r;
}

bool checkScalars(const SchemaNode& n, const bson_value_t& v, Failures& f) {
    if (v.value_type == BSON_TYPE_UTF8) {
        std::string_view s(v.value.v_utf8.str, v.value.v_utf8.len);
        if (n.pattern && !n.pattern->matches(s) &&
            !f.add(valueRule(n, "pattern", "regular expression did not match", v)))
            return false;
        const int64_t len = codePoints(s);
        const char* lengthReason = "specified string length was not satisfied";
        if (n.maxLength && len > *n.maxLength && !f.add(valueRule(n, "maxLength", lengthReason, v)))
            return false;
        if (n.minLength && len < *n.minLength && !f.add(valueRule(n, "minLength", lengthReason, v)))
            return false;
    }
    if (!bson::isNumber(v.value_type)) return true;
    if (n.multipleOf) {
        double x = bson::toDouble(v), m = bson::toDouble(n.multipleOf->get());
        if ((!std::isfinite(x) || std::fmod(x, m) != 0) &&
            !f.add(valueRule(n, "multipleOf",
                             "considered value is not a multiple of the specified value", v)))
            return false;
    }
    auto outside = [&](const std::optional<Value>& b, bool exclusive, bool upper) {
        if (!b) return false;
        int c = bson::compareValues(v, b->get());
        return upper ? (exclusive ? c >= 0 : c > 0) : (exclusive ? c <= 0 : c < 0);
    };
    if (outside(n.maximum, n.exclusiveMaximum, true) &&
        !f.add(valueRule(n, "maximum", "comparison failed", v)))
        return false;
    if (outside(n.minimum, n.exclusiveMinimum, false) &&
        !f.add(valueRule(n, "minimum", "comparison failed", v)))
        return false;
    return true;
}

bool checkArray(const SchemaNode& n, const bson_value_t& v, Failures& f) {
    if (v.value_type != BSON_TYPE_ARRAY) return true;
    auto elems = elementsOf(v);
    const auto count = static_cast<int64_t>(elems.size());
    auto lengthRule = [&](const char* keyword) {
        bson::Doc r = valueRule(n, keyword, "array did not match specified length", v);
        BSON_APPEND_INT32(r.mut(), "numberOfItems", static_cast<int32_t>(count));
        return r;
    };
    if (n.minItems && count < *n.minItems && !f.add(lengthRule("minItems"))) return false;
    if (n.maxItems && count > *n.maxItems && !f.add(lengthRule("maxItems"))) return false;
    if (n.uniqueItems) {
        const Value* duplicate = nullptr;
        for (size_t i = 0; i < elems.size() && !duplicate; ++i)
            for (size_t j = 0; j < i && !duplicate; ++j)
                if (sameValue(elems[i].get(), elems[j].get())) duplicate = &elems[i];
        if (duplicate) {
            bson::Doc r = valueRule(n, "uniqueItems", "found a duplicate item", v);
            bson::appendValue(r.mut(), "duplicatedValue", duplicate->get());
            if (!f.add(std::move(r))) return false;
        }
    }
    // items: {schema} (every element), or additionalItems: {schema} after items: [...].
    auto firstFailing = [&](const SchemaNode& schema, size_t from, const char* keyword,
                            const char* reason) {
        for (size_t i = from; i < elems.size(); ++i) {
            Rules sub;
            if (!check(schema, elems[i].get(), f.sub(&sub)))
                return f.add(itemRule(n, keyword, schema, reason, i, sub));
        }
        return true;
    };
    if (n.items &&
        !firstFailing(*n.items, 0, "items", "At least one item did not match the sub-schema"))
        return false;
    if (!n.itemsIsList) return true;
    Rules failures;
    for (size_t i = 0; i < elems.size() && i < n.itemsList.size(); ++i) {
        Rules sub;
        if (check(*n.itemsList[i], elems[i].get(), f.sub(&sub))) continue;
        if (!f.collecting()) return f.add(bson::Doc());
        failures.push_back(indexed("itemIndex", static_cast<int64_t>(i), sub));
    }
    if (!failures.empty()) {
        bson::Doc r = rule(n, "items", false);
        appendRules(r.mut(), "details", failures);
        if (!f.add(std::move(r))) return false;
    }
    const size_t extraFrom = n.itemsList.size();
    if (n.additionalItems == Extra::kForbidden && elems.size() > extraFrom) {
        bson::Doc r = rule(n, "additionalItems");
        BSON_APPEND_UTF8(r.mut(), "reason", "found additional items");
        bson_t arr;
        BSON_APPEND_ARRAY_BEGIN(r.mut(), "additionalItems", &arr);
        for (size_t i = extraFrom; i < elems.size(); ++i)
            bson::appendValue(&arr, std::to_string(i - extraFrom), elems[i].get());
        bson_append_array_end(r.mut(), &arr);
        if (!f.add(std::move(r))) return false;
    }
    if (n.additionalItems == Extra::kSchema &&
        !firstFailing(*n.additionalItemsSchema, extraFrom, "additionalItems",
                      "At least one additional item did not match the sub-schema"))
        return false;
    return true;
}

bool hasField(const bson_t* d, std::string_view name) {
    bson_iter_t it;
    return bson_iter_init_find_w_len(&it, d, name.data(), static_cast<int>(name.size()));
}

std::vector<std::string> missingFields(const bson_t* obj, const std::vector<std::string>& names) {
    std::vector<std::string> missing;
    for (const auto& name : names)
        if (!hasField(obj, name)) missing.push_back(name);
    return missing;
}

/// A compound rule (properties, patternProperties, dependencies, allOf ...)
/// from the entries its parts reported: {operatorName, <key>: [entries]}.
bool addCompound(Failures& f, const SchemaNode& n, const char* keyword, const char* key,
                 const Rules& entries) {
    if (entries.empty()) return true;
    bson::Doc r = rule(n, keyword, false);
    appendRules(r.mut(), key, entries);
    return f.add(std::move(r));
}

/// {propertyName, [title, description], <extra fields>, details: [rules]}.
bson::Doc propertyEntry(const std::string& name, const SchemaNode& schema, const Rules& sub,
                        const char* regexMatched = nullptr) {
    bson::Doc e;
    BSON_APPEND_UTF8(e.mut(), "propertyName", name.c_str());
    appendAnnotations(e.mut(), schema);
    if (regexMatched) BSON_APPEND_UTF8(e.mut(), "regexMatched", regexMatched);
    appendRules(e.mut(), "details", sub);
    return e;
}

bool checkObject(const SchemaNode& n, const bson_value_t& v, Failures& f) {
    bson_t obj;
    if (v.value_type != BSON_TYPE_DOCUMENT || !viewOf(v, &obj)) return true;
    // A part failed: in yes/no mode that settles it.
    auto stop = [&] { return !f.collecting() && !f.add(bson::Doc()); };
    Rules properties;
    for (const auto& p : n.properties) {
        bson_iter_t it;
        if (!bson_iter_init_find_w_len(&it, &obj, p.name.data(), static_cast<int>(p.name.size())))
            continue;  // absent: `required` reports it
        Rules sub;
        if (check(*p.schema, *bson_iter_value(&it), f.sub(&sub))) continue;
        if (stop()) return false;
        properties.push_back(propertyEntry(p.name, *p.schema, sub));
    }
    if (!addCompound(f, n, "properties", "propertiesNotSatisfied", properties)) return false;

    if (n.additionalProperties != Extra::kAbsent || !n.patternProperties.empty()) {
        std::vector<std::string> additional;
        std::optional<bson::Doc> failingAdditional;
        Rules patterns;
        std::vector<bool> reported(n.patternProperties.size(), false);
        bson_iter_t it;
        bson_iter_init(&it, &obj);
        while (bson_iter_next(&it)) {
            std::string name(bson_iter_key(&it), bson_iter_key_len(&it));
            const bson_value_t& fv = *bson_iter_value(&it);
            bool declared = std::any_of(n.properties.begin(), n.properties.end(),
                                        [&](const NamedSchema& p) { return p.name == name; });
            bool patterned = false;
            for (size_t i = 0; i < n.patternProperties.size(); ++i) {
                const auto& pp = n.patternProperties[i];
                if (!pp.regex.matches(name)) continue;
                patterned = true;
                Rules sub;
                if (check(*pp.schema, fv, f.sub(&sub))) continue;
                if (stop()) return false;
                if (reported[i]) continue;  // mongod reports the first property per pattern
                reported[i] = true;
                patterns.push_back(propertyEntry(name, *pp.schema, sub, pp.pattern.c_str()));
            }
            if (declared || patterned) continue;
            additional.push_back(name);
            if (n.additionalProperties != Extra::kSchema || failingAdditional) continue;
            Rules sub;
            if (check(*n.additionalPropertiesSchema, fv, f.sub(&sub))) continue;
            if (stop()) return false;
            bson::Doc r = rule(n, "additionalProperties", false);
            appendAnnotations(r.mut(), *n.additionalPropertiesSchema);
            BSON_APPEND_UTF8(r.mut(), "reason",
                             "at least one additional property did not match the subschema");
            BSON_APPEND_UTF8(r.mut(), "failingProperty", name.c_str());
            appendRules(r.mut(), "details", sub);
            failingAdditional = std::move(r);
        }
        if (n.additionalProperties == Extra::kForbidden && !additional.empty()) {
            bson::Doc r = rule(n, "additionalProperties");
            bson::appendStringArray(r.mut(), "additionalProperties", additional);
            if (!f.add(std::move(r))) return false;
        }
        if (failingAdditional && !f.add(std::move(*failingAdditional))) return false;
        if (!addCompound(f, n, "patternProperties", "details", patterns)) return false;
    }
    if (auto missing = missingFields(&obj, n.required); !missing.empty()) {
        bson::Doc r = rule(n, "required");
        bson::appendStringArray(r.mut(), "missingProperties", missing);
        if (!f.add(std::move(r))) return false;
    }
    const int64_t fields = countFields(v);
    auto countRule = [&](const char* keyword) {
        bson::Doc r = rule(n, keyword);
        BSON_APPEND_UTF8(r.mut(), "reason", "specified number of properties was not satisfied");
        BSON_APPEND_INT32(r.mut(), "numberOfProperties", static_cast<int32_t>(fields));
        return r;
    };
    if (n.minProperties && fields < *n.minProperties && !f.add(countRule("minProperties")))
        return false;
    if (n.maxProperties && fields > *n.maxProperties && !f.add(countRule("maxProperties")))
        return false;
    Rules dependencies;
    for (const auto& d : n.dependencies) {
        if (!hasField(&obj, d.property)) continue;
        bson::Doc e;
        BSON_APPEND_UTF8(e.mut(), "conditionalProperty", d.property.c_str());
        if (d.schema) {
            Rules sub;
            if (check(*d.schema, v, f.sub(&sub))) continue;
            if (stop()) return false;
            appendRules(e.mut(), "details", sub);
        } else {
            auto missing = missingFields(&obj, d.requiredProperties);
            if (missing.empty()) continue;
            if (stop()) return false;
            bson::appendStringArray(e.mut(), "missingProperties", missing);
        }
        dependencies.push_back(std::move(e));
    }
    return addCompound(f, n, "dependencies", "failingDependencies", dependencies);
}

bool checkLogical(const SchemaNode& n, const bson_value_t& v, Failures& f) {
    // allOf/anyOf/oneOf: which subschemas match, and ({index, details}) which fail.
    std::vector<int64_t> matched;
    Rules failed;
    auto evaluate = [&](const std::vector<NodePtr>& list) {
        matched.clear();
        failed.clear();
        for (size_t i = 0; i < list.size(); ++i) {
            Rules sub;
            if (check(*list[i], v, f.sub(&sub)))
                matched.push_back(static_cast<int64_t>(i));
            else if (f.collecting())
                failed.push_back(indexed("index", static_cast<int64_t>(i), sub, list[i].get()));
        }
    };
    auto notSatisfied = [&](const char* keyword) {
        if (!f.collecting()) return f.add(bson::Doc());
        return addCompound(f, n, keyword, "schemasNotSatisfied", failed);
    };
    if (!n.allOf.empty()) {
        evaluate(n.allOf);
        if (matched.size() != n.allOf.size() && !notSatisfied("allOf")) return false;
    }
    if (!n.anyOf.empty()) {
        evaluate(n.anyOf);
        if (matched.empty() && !notSatisfied("anyOf")) return false;
    }
    if (!n.oneOf.empty()) {
        evaluate(n.oneOf);
        if (matched.empty() && !notSatisfied("oneOf")) return false;
        if (matched.size() > 1) {
            bson::Doc r = rule(n, "oneOf", false);
            BSON_APPEND_UTF8(r.mut(), "reason", "more than one subschema matched");
            bson_t arr;
            BSON_APPEND_ARRAY_BEGIN(r.mut(), "matchingSchemaIndexes", &arr);
            for (size_t i = 0; i < matched.size(); ++i) {
                std::string k = std::to_string(i);
                BSON_APPEND_INT32(&arr, k.c_str(), static_cast<int32_t>(matched[i]));
            }
            bson_append_array_end(r.mut(), &arr);
            if (!f.add(std::move(r))) return false;
        }
    }
    if (n.notSchema && check(*n.notSchema, v, nullptr)) {
        bson::Doc r = rule(n, "not", false);
        BSON_APPEND_UTF8(r.mut(), "reason", "child expression matched");
        if (!f.add(std::move(r))) return false;
    }
    if (n.enumValues &&
        std::none_of(n.enumValues->begin(), n.enumValues->end(),
                     [&](const Value& e) { return sameValue(e.get(), v); }) &&
        !f.add(valueRule(n, "enum", "value was not found in enum", v)))
        return false;
    return true;
}

/// Applies schema `n` to the value `v`; appends the failed rules to `out` when
/// given (else stops at the first failure). True when `v` satisfies `n`.
bool check(const SchemaNode& n, const bson_value_t& v, Rules* out) {
    Failures f(out);
    if (!checkScalars(n, v, f) || !checkArray(n, v, f) || !checkObject(n, v, f) ||
        !checkLogical(n, v, f))
        return false;
    if (n.type && !n.type->matches(v, nullptr)) {
        bson::Doc r = valueRule(n, n.typeKeyword, "type did not match", v);
        BSON_APPEND_UTF8(r.mut(), "consideredType",
                         std::string(bson::typeName(v.value_type)).c_str());
        if (!f.add(std::move(r))) return false;
    }
    return f.ok();
}

}  // namespace

JsonSchema::~JsonSchema() = default;
JsonSchema::JsonSchema(JsonSchema&&) noexcept = default;

StatusWith<std::unique_ptr<JsonSchema>> JsonSchema::parse(const bson_t* schema) {
    try {
        std::unique_ptr<JsonSchema> s(new JsonSchema());
        s->root_ = parseNode(schema, 0);
        return s;
    } catch (const DBException& e) {
        return e.status();
    }
}

bool JsonSchema::matches(const bson_t* doc) const {
    // Documents are objects: a top-level type that excludes "object" matches nothing.
    if (!root_->typeAllowsObject) return false;
    return check(*root_, borrowDocument(doc), nullptr);
}

bson::Doc JsonSchema::explain(const bson_t* doc) const {
    bson::Doc d;
    BSON_APPEND_UTF8(d.mut(), "operatorName", "$jsonSchema");
    appendAnnotations(d.mut(), *root_);
    Rules rules;
    check(*root_, borrowDocument(doc), &rules);
    appendRules(d.mut(), "schemaRulesNotSatisfied", rules);
    return d;
}

JsonSchemaExpr::JsonSchemaExpr(std::unique_ptr<JsonSchema> s)
    : MatchExpr(Kind::kJsonSchema), schema_(std::move(s)) {}
JsonSchemaExpr::~JsonSchemaExpr() = default;

bool JsonSchemaExpr::matches(const bson_value_t& input, MatchDetails*) const {
    bson_t doc;
    return viewOf(input, &doc) && schema_->matches(&doc);
}

}  // namespace halo::query
