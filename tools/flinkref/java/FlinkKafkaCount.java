// A real Flink 1.20 job on a Kafka topic: Flink's own Kafka source, a tumbling event-time window
// count per key, late elements to a side output. tests/kafka/test_kafka_flink.py compares what it
// gives with tidemark's streaming run on the same topic (driver: tools/flinkref/flink_kafka.py).
//
// Usage: java -cp build:<pyflink/lib/*>:<flink-connector-kafka + kafka-clients jars> FlinkKafkaCount
//            BOOTSTRAP TOPIC BOUND_MS WINDOW_MS MODE OUT.json
//
// Records are JSON values {"key": str, "ts": long}. The source reads the topic from its earliest
// offsets to the latest ones at start (bounded), parallelism 1 (one reader holds every partition).
// MODE:
//   per-partition  WatermarkStrategy.forBoundedOutOfOrderness(BOUND_MS) on the source: Flink's
//                  per-split watermarks, one generator per Kafka partition, the minimum forwarded;
//   after-source   no watermarks on the source, the same strategy assigned after it: one generator
//                  over the reader's interleaving of the partitions (Flink after a union/rebalance).
// OUT.json: {"main": [[key, start, end, count], ...], "late": [[partition, key, ts], ...]}.
// Written for tidemark; no Flink source code is copied.

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.RestOptions;
import org.apache.flink.configuration.RestartStrategyOptions;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.flink.util.CloseableIterator;
import org.apache.flink.util.OutputTag;
import org.apache.kafka.clients.consumer.ConsumerRecord;

public class FlinkKafkaCount {
    static final ObjectMapper MAPPER = new ObjectMapper();

    /** (partition, key, ts) of a record whose value is {"key": ..., "ts": ...}. */
    public static final class Records implements KafkaRecordDeserializationSchema<Tuple3<Integer, String, Long>> {
        @Override
        public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Tuple3<Integer, String, Long>> out)
                throws java.io.IOException {
            JsonNode value = MAPPER.readTree(new String(record.value(), StandardCharsets.UTF_8));
            out.collect(Tuple3.of(record.partition(), value.get("key").asText(), value.get("ts").asLong()));
        }

        @Override
        public TypeInformation<Tuple3<Integer, String, Long>> getProducedType() {
            return Types.TUPLE(Types.INT, Types.STRING, Types.LONG);
        }
    }

    /** One line per window: ["main", key, start, end, count]. */
    public static final class Count
            extends ProcessWindowFunction<Tuple3<Integer, String, Long>, String, String, TimeWindow> {
        @Override
        public void process(String key, Context context, Iterable<Tuple3<Integer, String, Long>> elements,
                            Collector<String> out) throws Exception {
            long n = 0;
            for (Tuple3<Integer, String, Long> ignored : elements) {
                n++;
            }
            TimeWindow window = context.window();
            out.collect(MAPPER.writeValueAsString(List.of("main", key, window.getStart(), window.getEnd(), n)));
        }
    }

    static String late(Tuple3<Integer, String, Long> e) throws Exception {
        return MAPPER.writeValueAsString(List.of("late", e.f0, e.f1, e.f2));
    }

    static DataStream<Tuple3<Integer, String, Long>> read(StreamExecutionEnvironment env, String[] args) {
        KafkaSource<Tuple3<Integer, String, Long>> source = KafkaSource.<Tuple3<Integer, String, Long>>builder()
                .setBootstrapServers(args[0])
                .setTopics(args[1])
                .setGroupId("tidemark-flink-kafka-count")
                .setStartingOffsets(OffsetsInitializer.earliest())
                .setBounded(OffsetsInitializer.latest())
                .setDeserializer(new Records())
                .build();
        WatermarkStrategy<Tuple3<Integer, String, Long>> strategy = WatermarkStrategy
                .<Tuple3<Integer, String, Long>>forBoundedOutOfOrderness(Duration.ofMillis(Long.parseLong(args[2])))
                .withTimestampAssigner((e, recordTimestamp) -> e.f2);
        switch (args[4]) {
            case "per-partition":
                return env.fromSource(source, strategy, "kafka");
            case "after-source":
                return env.fromSource(source, WatermarkStrategy.noWatermarks(), "kafka")
                        .assignTimestampsAndWatermarks(strategy);
            default:
                throw new IllegalArgumentException("MODE must be per-partition or after-source, not " + args[4]);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 6) {
            System.err.println("usage: FlinkKafkaCount BOOTSTRAP TOPIC BOUND_MS WINDOW_MS MODE OUT.json");
            System.exit(2);
        }
        Configuration conf = new Configuration();
        conf.set(RestartStrategyOptions.RESTART_STRATEGY, "none");
        conf.set(RestOptions.BIND_PORT, "0");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        OutputTag<Tuple3<Integer, String, Long>> lateTag =
                new OutputTag<>("late", Types.TUPLE(Types.INT, Types.STRING, Types.LONG));
        SingleOutputStreamOperator<String> counts = read(env, args)
                .keyBy(e -> e.f1, Types.STRING)
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(Long.parseLong(args[3]))))
                .sideOutputLateData(lateTag)
                .process(new Count(), Types.STRING);
        DataStream<String> lines = counts.union(counts.getSideOutput(lateTag).map(FlinkKafkaCount::late, Types.STRING));
        List<JsonNode> main = new ArrayList<>();
        List<JsonNode> lateElements = new ArrayList<>();
        try (CloseableIterator<String> it = lines.executeAndCollect("tidemark-flink-kafka-count")) {
            while (it.hasNext()) {
                JsonNode line = MAPPER.readTree(it.next());
                List<JsonNode> into = line.get(0).asText().equals("main") ? main : lateElements;
                List<JsonNode> fields = new ArrayList<>();
                for (int i = 1; i < line.size(); i++) {
                    fields.add(line.get(i));
                }
                into.add(MAPPER.valueToTree(fields));
            }
        }
        MAPPER.writeValue(new File(args[5]), java.util.Map.of("main", main, "late", lateElements));
    }
}
