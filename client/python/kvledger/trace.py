"""The JSON-lines trace format (docs/trace-format.md): one kvledger.v1.Record per line in the
protobuf JSON mapping with the proto field names, as `kvledger replay` reads it."""
import json

from google.protobuf import json_format

from kvledger.records import make_record
from kvledger.v1 import record_pb2


def write_trace(destination, records):
    """Writes records (Record messages or dicts of proto field names) to a path or a text file
    object, one JSON object per line. Returns the number of lines written."""
    def lines():
        for r in records:
            message = r if isinstance(r, record_pb2.Record) else make_record(**r)
            yield json.dumps(json_format.MessageToDict(message, preserving_proto_field_name=True),
                             separators=(",", ":")) + "\n"
    if hasattr(destination, "write"):
        count = 0
        for line in lines():
            destination.write(line)
            count += 1
        return count
    with open(destination, "w", encoding="utf-8") as f:
        return write_trace(f, records)


def read_trace(source):
    """Yields the Record of every non-empty line of a path or text file object; a line that does
    not parse raises ValueError naming its line number."""
    if not hasattr(source, "read"):
        with open(source, encoding="utf-8") as f:
            yield from read_trace(f)
        return
    for number, line in enumerate(source, 1):
        if not line.strip():
            continue
        try:
            yield json_format.Parse(line, record_pb2.Record())
        except json_format.ParseError as e:
            raise ValueError(f"line {number}: {e}") from e
