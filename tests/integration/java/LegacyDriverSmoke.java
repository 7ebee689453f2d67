// The MongoDB Java driver 3.6 (Debian's libmongodb-java, the driver YCSB 0.17 is built on)
// against a server given as its only argument (a mongodb:// URI): it opens with isMaster
// and buildinfo over OP_QUERY, then CRUD. Prints one line per step; exits non-zero on any
// failure.
import com.mongodb.MongoClient;
import com.mongodb.MongoClientURI;
import com.mongodb.client.MongoCollection;
import com.mongodb.client.model.Filters;
import com.mongodb.client.model.Updates;
import java.util.ArrayList;
import java.util.Date;
import java.util.List;
import org.bson.Document;

public class LegacyDriverSmoke {
    public static void main(String[] args) {
        MongoClient client = new MongoClient(new MongoClientURI(args[0]));
        try {
            String db = args.length > 1 ? args[1] : "legacy";
            String coll = args.length > 2 ? args[2] : "things";
            Document info = client.getDatabase("admin").runCommand(new Document("buildinfo", 1));
            System.out.println("buildinfo version " + info.getString("version"));
            MongoCollection<Document> c = client.getDatabase(db).getCollection(coll);
            List<Document> docs = new ArrayList<>();
            for (int i = 0; i < 50; i++)
                docs.add(new Document("_id", "user" + i).append("date", new Date()).append("field0", "v" + i));
            c.insertMany(docs);
            System.out.println("inserted " + c.count());
            c.updateOne(Filters.eq("_id", "user7"), Updates.set("field0", "changed"));
            Document seven = c.find(Filters.eq("_id", "user7")).first();
            System.out.println("user7 " + seven.getString("field0"));
            int n = 0;
            for (Document d : c.find().batchSize(7)) n++;
            System.out.println("scanned " + n);
            c.deleteOne(Filters.eq("_id", "user0"));
            System.out.println("after delete " + c.count());
        } finally {
            client.close();
        }
    }
}
