"""Tracebacks: the exception and the frame in the user's own code."""

from labcoat.diagnose import Frame, parse_tracebacks, user_frame
from labcoat.diagnose._traceback import is_library

TRACE = """\
Traceback (most recent call last):
  File "/home/ada/proj/train.py", line 88, in <module>
    main()
  File "/home/ada/proj/train.py", line 61, in main
    loss = model(batch).loss
  File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1532, in _call
    return self._call_impl(*args, **kwargs)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "/home/ada/proj/model.py", line 40, in forward
    att = q @ k.transpose(-2, -1)
  File "/usr/lib/python3.11/functools.py", line 12, in wrapper
    return f(*a)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.""".splitlines()


def test_the_last_frame_in_user_code_is_found():
    (error,) = parse_tracebacks(["step 5 loss 2.0", *TRACE, "after"])
    assert error.type == "torch.OutOfMemoryError" and error.short_type == "OutOfMemoryError"
    assert error.message == "CUDA out of memory. Tried to allocate 2.00 GiB."
    assert len(error.frames) == 5 and (error.start, error.end) == (1, len(TRACE))
    assert error.user_frame == Frame("/home/ada/proj/model.py", 40, "forward",
                                     "att = q @ k.transpose(-2, -1)")
    assert str(error.user_frame) == "/home/ada/proj/model.py:40 in forward"


def test_chained_tracebacks_are_parsed_separately():
    lines = ["Traceback (most recent call last):", '  File "/a/x.py", line 1, in f', "    g()",
             "OSError: [Errno 28] No space left on device", "",
             "During handling of the above exception, another exception occurred:", "",
             "Traceback (most recent call last):", '  File "/a/y.py", line 2, in h', "    f()",
             "RuntimeError: [enforce fail at inline_container.cc:595] . unexpected pos 10"]
    first, second = parse_tracebacks(lines)
    assert (first.type, second.type) == ("OSError", "RuntimeError")
    assert "No space left" in first.message and second.user_frame.file == "/a/y.py"


def test_a_cut_off_traceback_has_no_type():
    (error,) = parse_tracebacks(TRACE[:5])
    assert error.type is None and error.user_frame.function == "main"


def test_library_paths():
    for path in ("/opt/conda/lib/python3.11/site-packages/torch/x.py",
                 "/usr/lib/python3/dist-packages/y.py", "/usr/lib/python3.11/threading.py",
                 "<frozen runpy>", "/opt/conda/bin/torchrun", r"C:\Python311\Lib\json\x.py"):
        assert is_library(path), path
    for path in ("/home/ada/proj/train.py", "train.py", "/work/src/labcoat/x.py"):
        assert not is_library(path), path
    assert user_frame([Frame("/usr/lib/python3.11/x.py", 1, "f")]) is None
