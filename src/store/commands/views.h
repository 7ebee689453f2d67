#pragma once
// Views, as mongod keeps them: one document per view in `<db>.system.views`
// ({_id: "<db>.<view>", viewOn: "<coll or view>", pipeline: [...], collation?}),
// written and replicated like any document. A read on a view (find, aggregate,
// count, distinct) runs as an aggregate over the collection at the bottom of
// the chain with the views' pipelines in front of its own; writes, indexes and
// change streams on a view fail with CommandNotSupportedOnView (166).
//
// Locking: findView/resolveView/refuseView take the catalog's DDL lock shared
// themselves; viewsIn expects the caller to hold it.
#include <optional>
#include <string>
#include <vector>

#include "bson/doc.h"
#include "store/commands/command.h"

namespace halo::store {

class Store;

struct ViewDefinition {
    std::string ns;      // "<db>.<view>"
    std::string viewOn;  // a collection or view of the same database (name only)
    bson::Doc pipeline;  // an array
    std::optional<bson::Doc> collation;
};

/// The views of `db` (the caller holds the DDL lock shared).
std::vector<ViewDefinition> viewsIn(Store& store, const std::string& db);

/// The view named `ns`; nullopt when there is none (a collection, or nothing).
std::optional<ViewDefinition> findView(Store& store, const std::string& ns);

/// What a read on view `ns` runs: the collection at the bottom of the chain and
/// the views' pipelines, innermost first. nullopt when `ns` is not a view.
/// A chain deeper than 20 fails with ViewDepthLimitExceeded (165).
struct ResolvedView {
    std::string sourceNs;
    bson::Doc pipeline;                  // an array
    std::optional<bson::Doc> collation;  // the outermost view's default collation
};
std::optional<ResolvedView> resolveView(Store& store, const std::string& ns);

/// CommandNotSupportedOnView (166) when `ns` is a view; `what` names the operation.
void refuseView(Store& store, const std::string& ns);

/// create with viewOn/pipeline (and collation): validates as mongod does and
/// writes the definition.
void createView(OperationContext& op, const std::string& ns, const bson_t* options);

/// collMod of a view: viewOn and pipeline replaced. False when `ns` is no view.
bool modifyView(OperationContext& op, const std::string& ns, const bson_t* viewOn,
                const bson_t* pipeline);

/// drop of a view. False when `ns` is no view.
bool dropView(OperationContext& op, const std::string& ns);

/// The find, count or distinct command `op` on view `ns` as an aggregate
/// command document over the view (same generic arguments).
bson::Doc findAsAggregate(const OperationContext& op, const std::string& viewName);
bson::Doc countAsAggregate(const OperationContext& op, const std::string& viewName);
bson::Doc distinctAsAggregate(const OperationContext& op, const std::string& viewName,
                              const std::string& key);

}  // namespace halo::store
