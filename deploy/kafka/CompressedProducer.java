// A real Java producer (kafka-clients, the client most production topics are written with), run
// as a single-file source program:
//   java -cp '<libs>/*' CompressedProducer.java <bootstrap> <topic> <compression.type> < records
// stdin: one record per line, "key<TAB>value" (UTF-8). Settings as Kafka's console producer with
// --compression-codec: enable.idempotence=true, acks=all, batches of up to 64 KiB. Prints the
// number of acknowledged records; exit 1 on any send error. Used by the tests to check that the
// workers read every codec (none, gzip, snappy, lz4, zstd).
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;

public class CompressedProducer {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, args[2]);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.LINGER_MS_CONFIG, "20");
        p.put(ProducerConfig.BATCH_SIZE_CONFIG, "65536");
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        List<Future<RecordMetadata>> sent = new ArrayList<>();
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p);
             BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                if (line.isEmpty()) continue;
                int tab = line.indexOf('\t');
                String key = tab < 0 ? null : line.substring(0, tab);
                String value = tab < 0 ? line : line.substring(tab + 1);
                sent.add(producer.send(new ProducerRecord<>(args[1], key, value)));
            }
            producer.flush();
            for (Future<RecordMetadata> f : sent) f.get();
        }
        System.out.println(sent.size());
    }
}
