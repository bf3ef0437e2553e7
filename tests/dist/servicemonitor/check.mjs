// Validates ServiceMonitor documents (a JSON array, argv[2]) against the Prometheus Operator's
// ServiceMonitor schema (@kubernetes-models/prometheus-operator, generated from its CRD).
// Exits 1 naming the first violation of each document; prints one line per valid one.
import { readFileSync } from "node:fs";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

const docs = JSON.parse(readFileSync(process.argv[2], "utf8"));
let failed = false;
for (const doc of docs) {
  try {
    new ServiceMonitor(doc).validate();
    console.log(`servicemonitor/${doc.metadata.name}: valid against monitoring.coreos.com/v1`);
  } catch (e) {
    failed = true;
    console.error(`servicemonitor/${doc.metadata?.name}: ${e.message}`);
  }
}
if (docs.length === 0) {
  console.error("no ServiceMonitor to validate");
  failed = true;
}
process.exit(failed ? 1 : 0);
