"""An S3 client for the object-storage tests, on boto3 (the AWS SDK for Python).

It stands for what a team uses to move a store into object storage (`aws s3 sync`), so the
dataset the tests open was written by another client than ChainWeaver's.

    python3 scripts/s3_client.py ENDPOINT make-bucket BUCKET
    python3 scripts/s3_client.py ENDPOINT upload FOLDER BUCKET PREFIX
    python3 scripts/s3_client.py ENDPOINT list BUCKET PREFIX        (keys, one JSON list)
    python3 scripts/s3_client.py ENDPOINT get BUCKET KEY            (the object, to stdout)
    python3 scripts/s3_client.py ENDPOINT put BUCKET KEY TEXT       (an object holding TEXT)

Credentials are the fixed test pair an S3-compatible test server accepts.
"""

import json
import os
import sys

import boto3


def client(endpoint):
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="test",
        aws_secret_access_key="test",
        region_name="us-east-1",
    )


def upload(s3, folder, bucket, prefix):
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            relative = os.path.relpath(path, folder).replace(os.sep, "/")
            s3.upload_file(path, bucket, f"{prefix}/{relative}")


def main():
    endpoint, command, *rest = sys.argv[1:]
    s3 = client(endpoint)
    if command == "make-bucket":
        s3.create_bucket(Bucket=rest[0])
    elif command == "upload":
        upload(s3, *rest)
    elif command == "list":
        bucket, prefix = rest
        keys = []
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        print(json.dumps(sorted(keys)))
    elif command == "get":
        bucket, key = rest
        sys.stdout.buffer.write(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
    elif command == "put":
        bucket, key, text = rest
        s3.put_object(Bucket=bucket, Key=key, Body=text.encode())
    else:
        sys.exit(f"unknown command {command}")


if __name__ == "__main__":
    main()
